"""Slot sources: when a schedule fires, as UTC epoch milliseconds.

Every kind of schedule is reduced to one small interface, ``next_after`` and ``recent``, so the
scheduler's heap and its catch-up never care which kind of schedule an entry has. This is the
engine's side: plain numbers and parsed expressions, no Celery (``entries.derived`` asks Celery's
own schedules through the same interface). Sources that many entries share (one expression)
remember their last answer, because entries that fire together ask the same question one after
another. ``expr.slots`` adds the calendar's wrapper and is where the rest of the code imports
them from.
"""

from __future__ import annotations

import abc
from collections import deque
from datetime import timedelta, tzinfo

from celery_hashbeat.expr.cronexpr import CronExpr
from celery_hashbeat.expr.errors import NoFireTimeError
from celery_hashbeat.expr.localdays import (
    DAY_MS,
    EPOCH,
    MILLISECOND,
    to_datetime,
    to_ms,
)
from celery_hashbeat.expr.zones import zone_for

__all__ = [
    "DAY_MS",
    "EPOCH",
    "MILLISECOND",
    "ChainSlots",
    "CronSlots",
    "IntervalSlots",
    "Slots",
    "duration_ms",
    "to_datetime",
    "to_ms",
]

#: How many slots a catch-up walks forward from the last one sent before it searches back from
#: the present instead.
SCAN_LIMIT = 1000


def duration_ms(delta: timedelta) -> int:
    """A duration in whole milliseconds, rounded up so a slot never lands before its instant."""
    return -(-delta // MILLISECOND)


class Slots(abc.ABC):
    """The instants one entry fires at."""

    __slots__ = ()

    #: Whether the slots depend on where the chain started (a plain interval), so the start
    #: must be kept in the store for every leader to agree on it.
    chained = False

    #: Whether the schedule overrides ``is_due``, so each slot is put to it before it is sent.
    asks_is_due = False

    @abc.abstractmethod
    def next_after(self, ms: int) -> int:
        """The first slot strictly after ``ms``."""

    def daily_in(self, tz: tzinfo) -> bool:
        """Whether the slots fall at the same local times of zone ``tz`` every day while its
        offset holds: then slots moved between such days land on each other (``CalendarSlots``)."""
        return False

    def grid(self) -> tuple[int, int] | None:
        """(offset, period) in ms when the slots are every ``period`` at ``offset`` into each
        period counted from the epoch (then a wrapper answers by arithmetic); else None."""
        return None

    def consents(self, slot: int, last: int) -> bool:
        """Whether the schedule, asked at ``slot`` with its last run at ``last``, says due."""
        return True

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        """The last ``limit`` slots in ``(low, high]``, oldest first.

        A forward walk from ``low`` while it is short (exact even for a schedule whose slots
        depend on where the chain started). A longer backlog is searched back from ``high``: a
        window walked forward, widened until it holds ``limit`` slots or reaches ``low``, so
        irregular schedules (weekdays only, business hours) still give all ``limit`` slots. Each
        widening goes as far as the density seen so far says ``limit`` slots need, with a margin,
        at least twice and at most sixteen times as wide, so the windows walked add up to a few
        times the last one, and there are at most log2 of the backlog of them.
        """
        found, done = self._walk(low, high, limit, SCAN_LIMIT)
        if done:
            return found
        span = max(self.next_after(high) - high, 1)
        while True:
            start = max(low, high - span)
            found, _ = self._walk(start, high, limit, None)
            if len(found) >= limit or start == low:
                return found
            wanted = span * limit * 5 // (4 * len(found)) if found else span * 4
            span = min(max(wanted, span * 2), span * 16)

    def _walk(self, low: int, high: int, limit: int, steps: int | None) -> tuple[list[int], bool]:
        """The last ``limit`` slots in ``(low, high]``, and whether the walk got to ``high``
        within ``steps`` slots (None: no bound)."""
        found: deque[int] = deque(maxlen=limit)
        slot = self.next_after(low)
        while slot <= high:
            if steps is not None and len(found) == limit and steps <= 0:
                return list(found), False
            found.append(slot)
            slot = self.next_after(slot)
            if steps is not None:
                steps -= 1
        return list(found), True


class CronSlots(Slots):
    """A parsed expression; entries whose expressions resolve alike share one."""

    __slots__ = ("_after", "_next", "expr")

    def __init__(self, expr: CronExpr) -> None:
        self.expr = expr
        self._after = -1
        self._next = -1

    def next_after(self, ms: int) -> int:
        # The answer last given holds for every instant from the one asked up to it.
        if not self._after <= ms < self._next:
            self._next = self.expr.next_timestamp(ms // 1000) * 1000
            self._after = ms
        return self._next

    def daily_in(self, tz: tzinfo) -> bool:
        zone = zone_for(self.expr.tz)  # its own zone's, or fixed instants of each day
        return self.expr.same_every_day and (zone.fixed or zone is zone_for(tz))

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        found: list[int] = []
        before = high // 1000 + 1
        while len(found) < limit:
            try:
                before = self.expr.prev_timestamp(before)
            except NoFireTimeError:
                break
            if before * 1000 <= low:
                break
            found.append(before * 1000)
        found.reverse()
        return found


class IntervalSlots(Slots):
    """Every ``period`` ms at ``offset`` ms into each period, periods counted from the epoch."""

    __slots__ = ("offset", "period")

    def __init__(self, period: int, offset: int) -> None:
        self.period = period
        self.offset = offset

    def _at_or_before(self, ms: int) -> int:
        return ms - (ms - self.offset) % self.period

    def next_after(self, ms: int) -> int:
        return self._at_or_before(ms) + self.period

    def daily_in(self, tz: tzinfo) -> bool:
        return DAY_MS % self.period == 0

    def grid(self) -> tuple[int, int] | None:
        return self.offset, self.period

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        last = self._at_or_before(high)
        first = max(self.next_after(low), last - (limit - 1) * self.period)
        return list(range(first, last + 1, self.period))


class ChainSlots(Slots):
    """Celery's plain ``schedule``: each slot ``every`` ms after the one before, as its
    ``remaining_estimate`` computes, without a call per slot."""

    __slots__ = ("every",)
    chained = True

    def __init__(self, every: int) -> None:
        if every < 1:
            raise ValueError(f"the interval must be at least 1 ms, not {every} ms")
        self.every = every

    def next_after(self, ms: int) -> int:
        return ms + self.every

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        if high <= low:
            return []
        last = low + (high - low) // self.every * self.every
        first = max(low + self.every, last - (limit - 1) * self.every)
        return list(range(first, last + 1, self.every))
