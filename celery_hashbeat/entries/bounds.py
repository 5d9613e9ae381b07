"""An entry's bounds (docs/design.md §13): ``start`` and ``end`` (aware datetimes) and ``max_runs``.

The time bounds wrap the entry's slots, so that every leader plans, catches up and ends the
entry alike; ``max_runs`` is checked against the run count the store keeps beside the fence.
"""

from __future__ import annotations

from typing import Any

from celery_hashbeat.entries.errors import EntryFinished
from celery_hashbeat.expr.slots import Slots, to_datetime, to_ms
from celery_hashbeat.schedules import aware_datetime


class BoundedSlots(Slots):
    """The slots of ``inner`` from ``start`` to ``end`` (epoch ms, inclusive; None: unbounded)."""

    __slots__ = ("asks_is_due", "chained", "end", "inner", "start")

    def __init__(self, inner: Slots, start: int | None, end: int | None) -> None:
        self.inner, self.start, self.end = inner, start, end
        self.chained, self.asks_is_due = inner.chained, inner.asks_is_due

    def next_after(self, ms: int) -> int:
        if self.start is not None:
            ms = max(ms, self.start - 1)
        slot = self.inner.next_after(ms)
        if self.end is not None and slot > self.end:
            raise EntryFinished(f"its end, {_iso(self.end)}, has passed")
        return slot

    def consents(self, slot: int, last: int) -> bool:
        return self.inner.consents(slot, last)

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        if self.start is not None:
            low = max(low, self.start - 1)
        if self.end is not None:
            high = min(high, self.end)
        return self.inner.recent(low, high, limit) if low < high else []


def bound_ms(value: Any, name: str) -> int | None:
    """``start`` or ``end`` as epoch ms: an aware datetime or ISO 8601 text with an offset."""
    return None if value is None else to_ms(aware_datetime(value, repr(name)))


def check_bounds(start: int | None, end: int | None, max_runs: Any) -> int | None:
    """The bounds make sense together; returns ``max_runs`` as an int (or None)."""
    if start is not None and end is not None and start >= end:
        raise ValueError(f"'start' ({_iso(start)}) must come before 'end' ({_iso(end)})")
    if max_runs is None:
        return None
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise ValueError(f"'max_runs' must be a whole number of at least 1, not {max_runs!r}")
    return max_runs


def _iso(ms: int) -> str:
    return to_datetime(ms).isoformat(timespec="seconds")
