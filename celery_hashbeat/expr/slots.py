"""Slot arithmetic: when a schedule fires, as UTC epoch milliseconds.

Every kind of schedule is reduced to one small interface, ``next_after`` and ``recent``, so the
scheduler's heap and its catch-up never care which kind of schedule an entry has. This is the
engine's side: plain numbers and parsed expressions, no Celery (``entries.derived`` asks Celery's
own schedules through the same interface). Sources that many entries share (one expression)
remember their last answer, because entries that fire together ask the same question one after
another.
"""

from __future__ import annotations

import abc
from collections import deque
from datetime import date, datetime, time, timedelta, timezone, tzinfo

from celery_hashbeat.expr.calendar import HORIZON_DAYS, Calendar
from celery_hashbeat.expr.cronexpr import CronExpr
from celery_hashbeat.expr.errors import NoFireTimeError

UTC = timezone.utc

#: How many slots a catch-up walks forward from the last one sent before it searches back from
#: the present instead.
SCAN_LIMIT = 1000

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MILLISECOND = timedelta(milliseconds=1)


def to_datetime(ms: int) -> datetime:
    """An aware UTC datetime for an epoch-milliseconds slot."""
    return datetime.fromtimestamp(ms / 1000, UTC)


def to_ms(moment: datetime) -> int:
    """Epoch milliseconds of an aware datetime (naive ones are read as UTC, as Celery does)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // MILLISECOND


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
        if ms != self._after:
            self._next = self.expr.next_timestamp(ms // 1000) * 1000
            self._after = ms
        return self._next

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


class CalendarSlots(Slots):
    """The slots of ``inner`` with the days ``calendar`` excludes (in zone ``tz``) left out, or
    moved to the nearest day it does not exclude, at the same time of day (docs/design.md §17).

    The common case costs one lookup: the bounds of the local day asked last are kept, and the
    calendar answers from a set per year. A day that receives moved slots has its slots listed
    once (kept until another day is asked), so that two slots never land on one instant.
    """

    __slots__ = (
        "_day",
        "_high",
        "_landing",
        "_low",
        "asks_is_due",
        "calendar",
        "chained",
        "inner",
        "mode",
        "tz",
    )

    def __init__(self, inner: Slots, calendar: Calendar, tz: tzinfo, mode: str = "skip") -> None:
        self.inner, self.calendar, self.tz, self.mode = inner, calendar, tz, mode
        self.chained, self.asks_is_due = inner.chained, inner.asks_is_due
        self._low, self._high, self._day = 0, 0, 0
        self._landing: tuple[int, list[int]] = (0, [])

    def consents(self, slot: int, last: int) -> bool:
        return self.inner.consents(slot, last)

    def day_of(self, ms: int) -> int:
        """The local day (an ordinal) of instant ``ms``."""
        if self._low <= ms < self._high:
            return self._day
        day = to_datetime(ms).astimezone(self.tz).toordinal()
        self._low, self._high, self._day = self.day_start(day), self.day_start(day + 1), day
        return day

    def day_start(self, day: int) -> int:
        """The first instant (ms) of local day ``day``."""
        return to_ms(datetime.combine(date.fromordinal(day), time(), tzinfo=self.tz))

    def next_after(self, ms: int) -> int:
        inner, calendar = self.inner, self.calendar
        slot = inner.next_after(ms)
        day = self.day_of(slot)
        if self.mode == "skip":
            first = day
            while calendar.excluded(day):
                if day - first > HORIZON_DAYS:
                    raise self._never(ms)
                slot = inner.next_after(max(slot, self.day_start(calendar.next_open(day)) - 1))
                day = self.day_of(slot)
            return slot
        step = 1 if self.mode == "next_business_day" else -1
        if (
            day == self.day_of(ms)
            and not calendar.excluded(day)
            and not calendar.excluded(day - step)
        ):
            return slot  # nothing moves onto this day: its own next slot is the next one
        return self._moved_after(ms, step)

    def _moved_after(self, ms: int, step: int) -> int:
        calendar = self.calendar
        day = calendar.next_open(self.day_of(ms))
        first = day
        while day - first <= HORIZON_DAYS:
            for slot in self.landing(day):
                if slot > ms:
                    return slot
            following = self.inner.next_after(max(ms, self.day_start(day + 1) - 1))
            later = self.day_of(following)
            if not calendar.excluded(later):
                day = later
            elif step < 0 and (back := calendar.next_open(later, -1)) > day:
                day = back
            else:
                day = calendar.next_open(later)
        raise self._never(ms)

    def landing(self, day: int) -> list[int]:
        """Every slot on open day ``day``: its own and those moved onto it, in order."""
        if self._landing[0] == day:
            return self._landing[1]
        found = set(self._own(day))
        step = -1 if self.mode == "next_business_day" else 1
        source = day + step
        while self.calendar.excluded(source) and abs(source - day) <= HORIZON_DAYS:
            found.update(self.moved(slot, day) for slot in self._own(source))
            source += step
        landing = sorted(found)
        self._landing = (day, landing)
        return landing

    def _own(self, day: int) -> list[int]:
        """The inner slots on local day ``day``."""
        end = self.day_start(day + 1)
        slots, slot = [], self.inner.next_after(self.day_start(day) - 1)
        while slot < end:
            slots.append(slot)
            slot = self.inner.next_after(slot)
        return slots

    def moved(self, slot: int, day: int) -> int:
        """Slot ``slot`` at the same local time of day on day ``day``."""
        local = to_datetime(slot).astimezone(self.tz)
        target = datetime.combine(date.fromordinal(day), local.time(), tzinfo=self.tz)
        return to_ms(target.replace(fold=local.fold))

    def fate(self, slot: int) -> int | None:
        """Where inner slot ``slot`` goes: itself on an open day, None when skipped, or the
        instant it is moved to."""
        day = self.day_of(slot)
        if not self.calendar.excluded(day):
            return slot
        if self.mode == "skip":
            return None
        step = 1 if self.mode == "next_business_day" else -1
        return self.moved(slot, self.calendar.next_open(day, step))

    def _never(self, ms: int) -> NoFireTimeError:
        return NoFireTimeError(
            f"it never fires: the calendar {list(self.calendar.specs)} excludes every day it "
            f"has a slot on for {HORIZON_DAYS} days after {to_datetime(ms):%Y-%m-%d}; remove an "
            f"exclude entry or change the schedule"
        )
