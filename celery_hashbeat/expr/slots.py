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
    moved to the nearest day it does not exclude, at the same time of day (docs/design.md §20).

    The common case costs a comparison: the bounds of the local day asked last are kept, with
    whether its slots stand as they are (the day is open and, when slots move, no neighbour's
    slots move onto it); the calendar answers from a set per year. A day that receives moved
    slots has its slots listed once (kept until another day is asked), so that two slots never
    land on one instant.
    """

    __slots__ = (
        "_day",
        "_excluded",
        "_fast",
        "_high",
        "_landing",
        "_low",
        "_plain",
        "_span",
        "_span_end",
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
        self._low, self._high, self._day, self._plain, self._fast = 0, 0, 0, False, 0
        #: The UTC offset's span around the instant asked last: (start s, end s, offset s).
        self._span = (0, 0, 0)
        self._span_end = 0
        self._landing: tuple[int, list[int]] = (0, [])

    def consents(self, slot: int, last: int) -> bool:
        return self.inner.consents(slot, last)

    def day_of(self, ms: int) -> int:
        """The local day (an ordinal) of instant ``ms``; remembers its bounds and whether its
        slots stand as they are."""
        high = self._high
        if self._low <= ms < high:
            return self._day
        if high <= ms < high + DAY_MS and high + DAY_MS <= self._span_end:
            # The next day, inside the same offset's span (a daily schedule's usual question).
            day = self._day + 1
            low, high = high, high + DAY_MS
        else:
            day, low, high = self._compute_day(ms)
        excluded, step = self._excluded, self._step
        plain = not excluded(day) and not (step and excluded(day - step))
        self._low, self._high, self._day, self._plain = low, high, day, plain
        # The fast path's lower bound: the day's start if its slots stand, else nothing passes.
        self._fast = low if plain else high
        return day

    def _compute_day(self, ms: int) -> tuple[int, int, int]:
        """The local day of ``ms`` and its bounds (ms) inside the offset's span."""
        seconds = ms // 1000
        first, last, offset = self._span
        if not first <= seconds < last:
            first, last, offset = self._load_span(seconds)
        local_days = (seconds + offset) // DAY_S
        midnight = local_days * DAY_S - offset
        day = local_days + EPOCH_ORDINAL
        # Inside one offset's span, every instant of [midnight, midnight + a day) is this day.
        low = (midnight if midnight > first else first) * 1000
        high = (midnight + DAY_S if midnight + DAY_S < last else last) * 1000
        return day, low, high

    def _load_span(self, seconds: int) -> tuple[int, int, int]:
        """The span of one UTC offset around ``seconds`` (epoch s), as (start, end, offset)."""
        zone = self._zone
        if zone.fixed:
            self._span = (-(2**62), 2**62, zone.fixed_offset)
        else:
            segment = zone.segment(seconds)
            self._span = (segment.start, segment.end, segment.offset)
        self._span_end = self._span[1] * 1000
        return self._span

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

    def next_after(self, ms: int) -> int:
        slot = self.inner.next_after(ms)
        high = self._high
        if slot < high and self._fast <= (ms if self._step > 0 else slot):
            return slot  # the usual answer: a slot on the day asked last, which stands as it is
        if not self._step and high <= slot < high + DAY_MS and high + DAY_MS <= self._span_end:
            # Skipping, and the slot is on the next day (a daily schedule's usual answer).
            day = self._day + 1
            self._low, self._high, self._day = high, high + DAY_MS, day
            if not self._excluded(day):
                self._plain, self._fast = True, high
                return slot
            self._plain, self._fast = False, high + DAY_MS
            return self._skipped_after(slot, day, ms)
        before = self._day if self._low <= ms < self._high else None  # the day of ms, if known
        day = self.day_of(slot)
        if self._plain and (self._step <= 0 or self._before_is_plain(ms, before)):
            return slot
        if self._step == 0:
            return self._skipped_after(slot, day, ms)
        return self._moved_after(ms, self._step)

    def _before_is_plain(self, ms: int, known: int | None) -> bool:
        """Whether no slot moved forward can land between ``ms`` and the next inner slot: the
        day of ``ms`` (``known``, or found) and the day before it are open, or the slots moved
        onto it are all past (later days up to the slot have no slots, or the slot's own day
        says)."""
        day = known if known is not None else self._ms_day(ms)
        excluded = self._excluded
        if excluded(day):
            return False
        if not excluded(day - 1):
            return True
        landed, landing = self._landing  # the slots moved onto that day, when known
        return landed == day and (not landing or landing[-1] <= ms)

    def _ms_day(self, ms: int) -> int:
        """The local day of ``ms`` without moving the remembered day."""
        if self._low <= ms < self._high:
            return self._day
        return to_datetime(ms).astimezone(self.tz).toordinal()

    def _skipped_after(self, slot: int, day: int, ms: int) -> int:
        calendar, inner = self.calendar, self.inner
        first = day
        while calendar.excluded(day):
            if day - first > HORIZON_DAYS:
                raise self._never(ms)
            slot = inner.next_after(max(slot, self.day_start(calendar.next_open(day)) - 1))
            day = self.day_of(slot)
        return slot

    def _moved_after(self, ms: int, step: int) -> int:
        calendar = self.calendar
        day = calendar.next_open(self._ms_day(ms))
        first = day
        while day - first <= HORIZON_DAYS:
            if calendar.excluded(day - step):
                landing = self.landing(day)
                at = bisect_right(landing, ms)
                if at < len(landing):
                    return landing[at]
                following = self.inner.next_after(max(ms, self.day_start(day + 1) - 1))
            else:  # nothing moves onto this day: its own next slot, if it has one
                following = self.inner.next_after(max(ms, self.day_start(day) - 1))
                if following < self.day_start(day + 1):
                    return following
            later = self._ms_day(following)
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
        step = -self._step
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
        day = self._ms_day(slot)
        if not self.calendar.excluded(day):
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
