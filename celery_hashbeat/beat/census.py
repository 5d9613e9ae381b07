"""The worker census: which workers are alive, for the entries with ``"workers": "*"``.

The leader asks Celery's remote control which workers answer a ping, at most once per
``hashbeat_workers_refresh`` and on a thread of its own (a ping waits a second for replies), and
keeps the answer in the store so that every beat fans out alike (docs/design.md §11).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from celery_hashbeat._logs import FANOUT

if TYPE_CHECKING:
    from celery import Celery

logger = FANOUT

#: How long the leader waits for workers to answer its ping (seconds).
PING_TIMEOUT = 1.0


def ping_workers(app: Celery, timeout: float = PING_TIMEOUT) -> tuple[str, ...]:
    """The node names of the workers that answer a remote-control ping within ``timeout``."""
    replies = app.control.ping(timeout=timeout) or []
    return tuple(sorted({node for reply in replies for node in reply}))


class WorkerCensus:
    """Asks, off the beat's thread, which workers are alive: at most once per ``refresh``
    seconds, never two asks at once. ``poll`` starts an ask when one is due and hands back the
    answer of a finished one."""

    def __init__(self, app: Celery, refresh: float) -> None:
        self.app = app
        self.refresh = refresh
        self._next = 0.0
        self._thread: threading.Thread | None = None
        self._answer: tuple[str, ...] | None = None
        self._failure: str | None = None

    def due_now(self) -> None:
        """Ask at the next poll (a new leader wants a fresh answer)."""
        self._next = 0.0

    def poll(self) -> tuple[str, ...] | None:
        """The nodes of an ask that finished since the last poll, if any."""
        thread = self._thread
        if thread is not None:
            if thread.is_alive():
                return None
            self._thread = None
            answer, self._answer = self._answer, None
            return answer
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.refresh
            self._thread = threading.Thread(target=self._ask, name="hashbeat-census", daemon=True)
            self._thread.start()
        return None

    def _ask(self) -> None:
        try:
            self._answer = ping_workers(self.app)
        except Exception as exc:
            if self._failure is None:
                logger.warning(
                    "beat: cannot ask which workers are alive (%s: %s); the entries with "
                    '"workers": "*" keep their last known workers until it can',
                    type(exc).__name__,
                    exc,
                )
            self._failure = str(exc)
            return
        if self._failure is not None:
            logger.info("beat: the workers answer the census again")
            self._failure = None
