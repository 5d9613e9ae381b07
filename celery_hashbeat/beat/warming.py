"""A standby makes the plans and stencils of its entries' messages while it waits, so that the
first burst after it takes over costs what every later one does (docs/design.md §15).

A leader makes them as its slots come (``ahead``); a standby has nothing to send, so it walks
its entries instead, a little each tick (``BUDGET_S`` of the broker thread's time), and walks
them again a while after it finished (entries change; a plan kept and current costs a lookup).
Nothing is sent, claimed or written anywhere: only the sink's kept plans grow, as a leader's do.
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

    def tick(self) -> None:
        """Make a tick's share of plans (call it only while standing by)."""
        if self._walk is None:
            if time.monotonic() < self._again_at:
                return
            self._walk = self._walked()
        if self._publisher.warm(self._walk, BUDGET_S):
            self._walk = None
            self._again_at = time.monotonic() + AGAIN_S

    def _walked(self) -> Iterator[tuple[Entry, int]]:
        slot = self._now_ms()  # any slot makes the stencil: its text is replaced per slot
        for entry in list(self._entries.values()):
            yield entry, slot
