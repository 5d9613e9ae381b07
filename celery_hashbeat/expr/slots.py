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
from bisect import bisect_right
from collections import deque
from datetime import date, datetime, time, timedelta, timezone, tzinfo

from celery_hashbeat.expr.calendar import HORIZON_DAYS, Calendar
from celery_hashbeat.expr.cronexpr import CronExpr
from celery_hashbeat.expr.errors import NoFireTimeError
from celery_hashbeat.expr.zones import DAY as DAY_S
from celery_hashbeat.expr.zones import EPOCH_ORDINAL, zone_for

#: A day of a fixed offset, in milliseconds.
DAY_MS = DAY_S * 1000

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
        # The answer last given holds for every instant from the one asked up to it.
        if not self._after <= ms < self._next:
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


#: The slots of an excluded day.
NO_SLOTS: list[int] = []


class CalendarSlots(Slots):
    """The slots of ``inner`` with the days ``calendar`` excludes (in zone ``tz``) left out, or
    moved to the nearest day it does not exclude, at the same time of day (docs/design.md §20).

    Each local day is one of three kinds, told by set lookups: excluded (no slot), plain (the
    inner slots stand: asked of the inner source) or landing (open, and given the slots of the
    excluded days next to it: listed once, as a set, so that two slots never land on one
    instant, then answered by bisection). The day asked last is kept with its bounds and kind,
    so the usual ``next_after`` costs the inner answer plus two comparisons; a run of excluded
    days is jumped over whole, never slot by slot.
    """

    __slots__ = (
        "_after",
        "_day",
        "_excluded",
        "_high",
        "_listed",
        "_low",
        "_shut",
        "_span",
        "_span_high",
        "_span_low",
        "_step",
        "_zone",
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
        #: 0 to skip; 1 or -1: the direction a slot on an excluded day moves in.
        self._step = {"skip": 0, "next_business_day": 1}.get(mode, -1)
        self._zone = zone_for(tz)
        self._excluded = calendar.excluded
        #: The local day asked last, its bounds [low, high) in ms, whether it is excluded, and
        #: its slots unless it is plain (None; NO_SLOTS when excluded).
        self._day, self._low, self._high, self._shut = 0, 0, 0, False
        self._listed: list[int] | None = None
        #: With a landing day: the first inner slot past it and the days it takes slots from.
        self._after = 0
        #: The UTC offset's span around the instant asked last: (start s, end s, offset s),
        #: and its bounds in ms.
        self._span = (0, 0, 0)
        self._span_low, self._span_high = 0, 0

    def consents(self, slot: int, last: int) -> bool:
        return self.inner.consents(slot, last)

    def next_after(self, ms: int) -> int:
        if self._low <= ms < self._high:
            listed = self._listed
            if listed is None:
                slot = self.inner.next_after(ms)
                high = self._high
                if slot < high:
                    return slot  # the usual answer: a slot on a plain day, the day asked last
                later = high + DAY_MS
                if slot < later and self._span_low <= high and later <= self._span_high:
                    # The next day, as long as this one (a daily schedule's usual answer).
                    day, excluded = self._day + 1, self._excluded
                    if not excluded(day) and (self._step >= 0 or not excluded(day + 1)):
                        self._day, self._low, self._high = day, high, later
                        return slot
                return self._onward(ms, slot)
            at = bisect_right(listed, ms)
            if at < len(listed):
                return listed[at]  # a slot on a landing day, the day asked last
            if not self._shut:
                return self._onward(ms, self._after)  # the first inner slot past its days
        else:
            self._enter(self.day_of(ms))
        if self._shut:  # its slots went elsewhere; those moved back are before ms
            self._enter(self.calendar.next_open(self._day + 1), False)
        return self._onward(ms, None)

    def _onward(self, ms: int, slot: int | None) -> int:
        """The first slot after ``ms``, from the day asked last on; ``slot``: the inner slot
        after ``ms`` when it is known to lie past that day."""
        limit = self._day + HORIZON_DAYS
        while self._day <= limit:
            if slot is None:
                listed = self._listed
                if listed is not None:
                    at = bisect_right(listed, ms)
                    if at < len(listed):
                        return listed[at]
                    slot = self._after  # the first inner slot past the days listed
                else:
                    slot = self.inner.next_after(max(ms, self._low - 1))
                    if slot < self._high:
                        return slot
            # The days up to the slot's have no slot of their own, so none moved onto them
            # (those moved back land before an excluded day the slot's may start).
            day = self._later_day(slot)
            if self._excluded(day):
                way = self._step or 1
                self._enter(self.calendar.next_open(day + way, way), False)
            else:
                self._enter(day, False)
                if self._listed is None:
                    return slot
            slot = None
        raise self._never(ms)

    def _enter(self, day: int, shut: bool | None = None) -> None:
        """Make ``day`` the day asked last: its bounds, and its kind (``shut``: whether it is
        excluded, when known)."""
        if day == self._day + 1:
            low = self._high
            if self._span_low <= low and low + DAY_MS <= self._span_high:
                high = low + DAY_MS  # no change of offset: the usual day
            else:
                high = self.day_start(day + 1)
        else:
            low, high = self.day_start(day), self.day_start(day + 1)
        self._day, self._low, self._high = day, low, high
        excluded, step = self._excluded, self._step
        self._shut = shut = excluded(day) if shut is None else shut
        if shut:
            self._listed = NO_SLOTS
        elif step and excluded(day - step):
            self._listed, self._after = self.landing(day, low, high)
        else:
            self._listed = None

    def _later_day(self, ms: int) -> int:
        """The local day of ``ms``, which lies past the day asked last."""
        high = self._high
        if ms < high + DAY_MS and self._span_low <= high and high + DAY_MS <= self._span_high:
            return self._day + 1
        return self.day_of(ms)

    def day_of(self, ms: int) -> int:
        """The local day (an ordinal) of instant ``ms``."""
        seconds = ms // 1000
        offset = self._span_of(seconds)[2]
        return (seconds + offset) // DAY_S + EPOCH_ORDINAL

    def _span_of(self, seconds: int) -> tuple[int, int, int]:
        """The span of one UTC offset around ``seconds`` (epoch s), as (start, end, offset)."""
        span = self._span
        if span[0] <= seconds < span[1]:
            return span
        zone = self._zone
        if zone.fixed:
            span = (-(2**62), 2**62, zone.fixed_offset)
        else:
            segment = zone.segment(seconds)
            span = (segment.start, segment.end, segment.offset)
        self._span = span
        self._span_low, self._span_high = span[0] * 1000, span[1] * 1000
        return span

    def day_start(self, day: int) -> int:
        """The first instant (ms) of local day ``day``."""
        local = (day - EPOCH_ORDINAL) * DAY_S
        first, last, offset = self._span
        guess = local - offset
        if first <= guess < last:
            return guess * 1000
        zone = self._zone
        guess = local - zone.segment(local).offset
        if guess + zone.segment(guess).offset == local:
            return guess * 1000
        # Midnight falls in a daylight saving gap: the day starts where the gap ends.
        return to_ms(datetime.combine(date.fromordinal(day), time(), tzinfo=self.tz))

    def landing(self, day: int, low: int, high: int) -> tuple[list[int], int]:
        """Every slot on open day ``day`` (from ``low`` to ``high``), its own and those moved
        onto it from the excluded days next to it, in order; and the first inner slot past
        them all. One walk of the inner slots over those days."""
        excluded, day_start = self._excluded, self.day_start
        if self._step > 0:
            first = day - 1
            while excluded(first - 1) and day - first < HORIZON_DAYS:
                first -= 1
            starts = [*(day_start(ordinal) for ordinal in range(first, day)), low, high]
        else:
            first, last = day, day + 1
            while excluded(last + 1) and last - day < HORIZON_DAYS:
                last += 1
            starts = [low, high, *(day_start(ordinal) for ordinal in range(day + 2, last + 2))]
        found, inner, index, end = set(), self.inner, 0, starts[-1]
        span = self._span_of(starts[0] // 1000)
        # No change of offset over those days: a slot moves by whole days.
        shift = span[0] * 1000 <= starts[0] and end <= span[1] * 1000
        slot = inner.next_after(starts[0] - 1)
        while slot < end:
            while slot >= starts[index + 1]:
                index += 1
            if first + index == day:
                found.add(slot)
            else:
                found.add(slot + (day - first - index) * DAY_MS if shift else self.moved(slot, day))
            slot = inner.next_after(slot)
        return sorted(found), slot

    def moved(self, slot: int, day: int) -> int:
        """Slot ``slot`` at the same local time of day on day ``day``."""
        seconds, part = divmod(slot, 1000)
        first, last, offset = self._span_of(seconds)
        midnight = (day - EPOCH_ORDINAL) * DAY_S - offset
        guess = midnight + (seconds + offset) % DAY_S
        if first <= midnight and guess < last:  # one offset from its day's start: arithmetic
            return guess * 1000 + part
        local = to_datetime(slot).astimezone(self.tz)
        target = datetime.combine(date.fromordinal(day), local.time(), tzinfo=self.tz)
        return to_ms(target.replace(fold=local.fold))

    def fate(self, slot: int) -> int | None:
        """Where inner slot ``slot`` goes: itself on an open day, None when skipped, or the
        instant it is moved to."""
        day = self.day_of(slot)
        if not self._excluded(day):
            return slot
        if self._step == 0:
            return None
        return self.moved(slot, self.calendar.next_open(day, self._step))

    def _never(self, ms: int) -> NoFireTimeError:
        return NoFireTimeError(
            f"it never fires: the calendar {list(self.calendar.specs)} excludes every day it "
            f"has a slot on for {HORIZON_DAYS} days after {to_datetime(ms):%Y-%m-%d}; remove an "
            f"exclude entry or change the schedule"
        )
