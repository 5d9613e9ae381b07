"""Saying a thing once: an outage in two lines, a warning once per thing it is about.

A store or broker that is down for an hour fails thousands of calls; the log should say when it
broke and when it came back, not every failure in between. A warning about a setting or a stored
value should appear once, not on every read. A leaf beside ``_logs.py`` (the store uses it: no
Celery here).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable


class Outage:
    """Whether a dependency answers, as the log tells it: one line when it stops answering, one
    when it answers again, nothing in between."""

    def __init__(self, logger: logging.Logger, recovered: str) -> None:
        """``recovered`` is the line (info) for when it answers again; a ``%(cause)s`` in it
        becomes the last failure's text."""
        self._logger = logger
        self._recovered = recovered
        #: The last failure's text while the dependency is down; None while it answers.
        self.cause: str | None = None

    def failed(
        self,
        exc: BaseException,
        line: str,
        *args: object,
        level: int = logging.WARNING,
        traceback: bool = False,
    ) -> bool:
        """Note a failure; log ``line % args`` (with ``exc``'s traceback if asked) only if the
        dependency answered until now. True when this failure began the outage."""
        began = self.cause is None
        if began:
            self._logger.log(level, line, *args, exc_info=exc if traceback else None)
        self.cause = str(exc) or type(exc).__name__
        return began

    def answered(self) -> None:
        """Note an answer; log the recovery line if the dependency was down."""
        if self.cause is not None:
            self._logger.info(self._recovered, {"cause": self.cause})
            self.cause = None


class Once:
    """The things already warned about, so that each is warned about once (per process, or per
    owner of the ``Once``)."""

    def __init__(self) -> None:
        self._said: set[Hashable] = set()

    def first(self, thing: Hashable = None) -> bool:
        """True the first time ``thing`` is asked about, False ever after (no ``thing``: a
        ``Once`` for a single line)."""
        if thing in self._said:
            return False
        self._said.add(thing)
        return True

    def clear(self) -> None:
        """Forget what was said (a test starts afresh)."""
        self._said.clear()
