"""A beat makes the plans and stencils of its entries' messages while it waits, so that its
first burst costs what every later one does (docs/design.md §15).

A leader makes messages as its slots come (``ahead``), but only ``WINDOW_MS`` before them: the
first burst after a start or a take-over, with every plan still to make, would not fit. So a
standby, which has nothing to send, walks its entries a little each tick (``BUDGET_S`` of the
broker thread's time), and so does a leader while its next wake-up is more than ``SPARE_S``
away; each walks them again a while after it finished (entries change; a plan kept and current
costs a lookup). Nothing is sent, claimed or written anywhere: only the sink's kept plans grow.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from celery_hashbeat.entries.entry import Entry

#: The broker thread's time a standby's tick gives to making plans (seconds).
BUDGET_S = 0.05

#: A walk over the entries starts again this long after the last one ended (seconds).
AGAIN_S = 60.0

#: A leader warms only while its next wake-up is further away than this (seconds): a tick's
#: share and the second more a broker that does not answer may take (``Publisher.warm``); a
#: controls poll or a renewal may wait for a share, a slot never does.
SPARE_S = BUDGET_S + 1.0


class Warms(Protocol):
    """The publisher, as warming uses it."""

    def warm(self, entries: Iterator[tuple[Entry, int]], budget_s: float) -> bool: ...


class Warming:
    """Where a standby's walk over its entries is, and when the next one starts."""

    def __init__(
        self, entries: Mapping[str, Entry], publisher: Warms, now_ms: Callable[[], int]
    ) -> None:
        self._entries = entries
        self._publisher = publisher
        self._now_ms = now_ms
        self._walk: Iterator[tuple[Entry, int]] | None = None
        self._again_at = 0.0

    def tick(self) -> bool:
        """Make a tick's share of plans (while standing by, or leading with ``SPARE_S`` to
        spare); whether a walk is under way still, so that the next share may follow at once."""
        if self._walk is None:
            if time.monotonic() < self._again_at:
                return False
            self._walk = self._walked()
        if self._publisher.warm(self._walk, BUDGET_S):
            self._walk = None
            self._again_at = time.monotonic() + AGAIN_S
        return self._walk is not None

    def lead(self, to_wake_s: float, to_expiry_s: float) -> bool:
        """As a leader: make a share only while the next wake-up for a slot is more than
        ``SPARE_S`` away (``to_wake_s``) and a renewal the share delays still comes more than
        ``SPARE_S`` before the lease runs out (``to_expiry_s``); whether a walk is under way."""
        if min(to_wake_s, to_expiry_s - SPARE_S) <= SPARE_S:
            return False
        return self.tick()

    def _walked(self) -> Iterator[tuple[Entry, int]]:
        slot = self._now_ms()  # any slot makes the stencil: its text is replaced per slot
        for entry in list(self._entries.values()):
            yield entry, slot
