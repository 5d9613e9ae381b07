"""Slot arithmetic: the slot sources (``expr.sources``) and ``CalendarSlots``, the wrapper that
leaves out or moves the slots on the days an exclusion calendar names (docs/design.md §20).
The rest of the code imports every source from here.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import tzinfo

from celery_hashbeat.expr.calendar import HORIZON_DAYS, Calendar
from celery_hashbeat.expr.errors import NoFireTimeError
from celery_hashbeat.expr.localdays import DAY_MS, LocalDays
from celery_hashbeat.expr.sources import (
    EPOCH,
    MILLISECOND,
    ChainSlots,
    CronSlots,
    IntervalSlots,
    Slots,
    duration_ms,
    to_datetime,
    to_ms,
)

__all__ = [
    "DAY_MS",
    "EPOCH",
    "MILLISECOND",
    "CalendarSlots",
    "ChainSlots",
    "CronSlots",
    "IntervalSlots",
    "Slots",
    "duration_ms",
    "to_datetime",
    "to_ms",
]

#: How many days ahead the open runs are read at once (a stretch of open days is never longer).
RUN_DAYS = 32


class CalendarSlots(Slots):
    """The slots of ``inner`` with the days ``calendar`` excludes (in zone ``tz``) left out, or
    moved to the nearest day it does not exclude, at the same time of day (docs/design.md §20).

    The local days are cut into stretches, told by set lookups and bisection: *plain* (open
    days whose slots are the inner ones: asked of the inner source, or worked out when they are
    a plain grid) and *listed* (an open day with the excluded days whose slots move onto it:
    their slots listed once, as a set, so that two slots never land on one instant, then
    answered by bisection). Excluded days whose slots are skipped are passed over whole. The
    stretch asked last is kept with its bounds, so the usual ``next_after`` costs the inner
    answer plus two comparisons. When the inner slots fall at the same local times every day
    and the zone's offset holds over the days that move onto a day, the moved slots are that
    day's own: it is plain, and the days they came from are passed over, never walked; and the
    open runs of the next RUN_DAYS days are read at once, then entered one after another.
    """

    __slots__ = (
        "_after",
        "_daily",
        "_days",
        "_end",
        "_excluded",
        "_first",
        "_group",
        "_high",
        "_listed",
        "_low",
        "_period",
        "_phase",
        "_run_day",
        "_run_low",
        "_runs",
        "_step",
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
        self._daily = inner.daily_in(tz)
        self._phase, self._period = inner.grid() or (0, 0)
        self._days = LocalDays(tz)
        self._excluded = calendar.excluded
        #: The stretch asked last: its days [first, end), its bounds [low, high) in ms, and its
        #: slots when listed (None: plain).
        self._first, self._end, self._low, self._high = 0, 0, 0, 0
        self._listed: list[int] | None = None
        #: With listed slots: the first inner slot past the stretch.
        self._after = 0
        #: With a plain stretch of a daily source: the open runs that follow it, as the days
        #: each ends and starts at, counted from day ``_run_day`` (it starts at ``_run_low``
        #: ms), the last run first (small numbers: a few bytes each).
        self._runs: list[int] = []
        self._run_day, self._run_low = 0, 0
        #: The moving group found last: its first and last day, the day they land on, and
        #: whether its slots must be listed.
        self._group = (0, -1, 0, False)

    def consents(self, slot: int, last: int) -> bool:
        return self.inner.consents(slot, last)

    def next_after(self, ms: int) -> int:
        high = self._high
        if self._low <= ms < high:
            listed = self._listed
            if listed is None:
                period = self._period
                if period:  # a grid: the inner answer by arithmetic
                    slot = ms + period - (ms - self._phase) % period
                else:
                    slot = self.inner.next_after(ms)
                if slot < high:
                    return slot  # the usual answer: a slot on a plain day
                return self._onward(ms, slot)
            at = bisect_right(listed, ms)
            if at < len(listed):
                return listed[at]
        else:
            self._enter(self._days.day_of(ms))
        return self._onward(ms, None)

    def _onward(self, ms: int, slot: int | None) -> int:
        """The first slot after ``ms``, from the stretch asked last on; ``slot``: the first
        inner slot after ``ms``, when known."""
        limit = self._first + HORIZON_DAYS
        while True:
            listed = self._listed
            if listed is None:
                if slot is None:
                    slot = self.inner.next_after(max(ms, self._low - 1))
                if slot < self._high:
                    return slot
            else:
                at = bisect_right(listed, ms)
                if at < len(listed):
                    return listed[at]
                slot = self._after
            if self._end > limit:
                raise self._never(ms)
            high, runs = self._high, self._runs
            if runs and listed is None:  # the next open run, past closed days, one offset on
                first, end, day, base = runs.pop(), runs.pop(), self._run_day, self._run_low
                self._first, self._end = day + first, day + end
                self._low = low = base + first * DAY_MS
                self._high = base + end * DAY_MS
                if slot < low:  # on a closed day: the same time on this run's first day
                    slot = low + (slot - high) % DAY_MS
                continue
            self._enter(self._end)
            if slot < self._low:
                # Its day was passed over. It was that day's first inner slot (the day starts
                # past ms), so a daily source has it at the same time of day on the first day
                # here, if one offset holds from the day after the last stretch to this day.
                low, daily = self._low, self._daily and self._listed is None
                if daily and self._days.one_offset(high, low + DAY_MS):
                    slot = low + (slot - high) % DAY_MS
                else:
                    slot = None

    def _enter(self, day: int) -> None:
        """Make the stretch that holds ``day`` the one asked last (a listed one may start at
        an excluded day before it)."""
        excluded, step, calendar = self._excluded, self._step, self.calendar
        checked = False  # whether day is known to take no slots that must be listed
        if excluded(day):
            if not step:
                day = calendar.next_open(day)
            else:
                first, last, landing, merges = self._group_of(day)
                if merges:
                    self._list(first, last, landing)
                    return
                # Its slots land at an open day's own times: go on from the next open day.
                day, checked = last + 1 if step < 0 else landing, step > 0
        if step and not checked and excluded(day - step):
            first, last, landing, merges = self._group_of(day - step)
            if merges:
                self._list(first, last, landing)
                return
        runs = calendar.open_runs(day, day + RUN_DAYS)
        if not self._daily:
            del runs[1:]
        while len(runs) > 1 and not self._days.steady(day, runs[-1][1]):
            runs.pop()
        first, end = runs[-1]
        if step < 0 and end - 1 > day and excluded(end) and self._group_of(end)[3]:
            runs[-1] = first, end - 1  # its last day takes slots moved back that must be listed
            if end - 1 == first:
                runs.pop()
        self._stretch(day, runs[0][1], None)
        # With a daily source the closed days between the runs (one offset over them all)
        # hold slots that go nowhere or onto an open day's own times, so the runs after the
        # first are entered one after another without a search (the last first).
        self._run_day, self._run_low = day, self._low
        self._runs = [n - day for first, end in reversed(runs[1:]) for n in (end, first)]

    def _group_of(self, day: int) -> tuple[int, int, int, bool]:
        """The days whose slots move where those of excluded day ``day`` do: their first and
        last, the open day they land on, and whether their slots must be listed (unless they
        fall at that day's own times: the inner slots are daily, and the zone's offset holds
        from the first day's start to the last day's end)."""
        group = self._group
        if group[0] <= day <= group[1]:
            return group
        calendar, days = self.calendar, self._days
        if self._step > 0:
            first, excluded = day, self._excluded
            while excluded(first - 1) and day - first < HORIZON_DAYS:
                first -= 1
            last = landing = calendar.next_open(day)
        else:
            first = landing = calendar.next_open(day, -1)
            last = calendar.next_open(day) - 1
        merges = not self._daily or not days.steady(first, last + 1)
        self._group = group = (first, last, landing, merges)
        return group

    def _list(self, first: int, last: int, landing: int) -> None:
        """Make days ``first`` to ``last`` a listed stretch: every slot of open day ``landing``,
        its own and those moved onto it from the others, by one walk of the inner slots."""
        days = self._days
        starts = [days.day_start(ordinal) for ordinal in range(first, last + 2)]
        found, inner, index, end = set(), self.inner, 0, starts[-1]
        # No change of offset over those days: a slot moves by whole days.
        shift = days.one_offset(starts[0], end)
        slot = inner.next_after(starts[0] - 1)
        while slot < end:
            while slot >= starts[index + 1]:
                index += 1
            away = landing - first - index  # days
            if not away:
                found.add(slot)
            else:
                found.add(slot + away * DAY_MS if shift else days.moved(slot, landing))
            slot = inner.next_after(slot)
        self._stretch(first, last + 1, sorted(found))
        self._after = slot

    def _stretch(self, first: int, end: int, listed: list[int] | None) -> None:
        """Make days [first, end) the stretch asked last, with slots ``listed`` (None: plain)."""
        low, high = self._days.bounds(first, end)
        self._first, self._end, self._low, self._high = first, end, low, high
        self._runs = []
        self._listed = listed

    def fate(self, slot: int) -> int | None:
        """Where inner slot ``slot`` goes: itself on an open day, None when skipped, or the
        instant it is moved to."""
        day = self._days.day_of(slot)
        if not self._excluded(day):
            return slot
        if self._step == 0:
            return None
        return self._days.moved(slot, self.calendar.next_open(day, self._step))

    def _never(self, ms: int) -> NoFireTimeError:
        return NoFireTimeError(
            f"it never fires: the calendar {list(self.calendar.specs)} excludes every day it "
            f"has a slot on for {HORIZON_DAYS} days after {to_datetime(ms):%Y-%m-%d}; remove an "
            f"exclude entry or change the schedule"
        )
