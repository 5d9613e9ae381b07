"""Next and previous fire times, in integer epoch seconds.

Two layers. ``WallClock`` searches naive local ("wall") time, as seconds since 1970-01-01 00:00
of the wall calendar, with table lookups per field and bit scans per month. ``Timing`` maps wall
times to instants with docs/design.md §2's DST rule:

- a fixed-time job maps each matching wall time to its first instant; a wall time in a
  spring-forward gap maps to the end of the gap. That map never decreases, so the answer is the
  first matching wall time whose instant is past the start.
- any other job fires at the instants whose wall time matches. Between two offset transitions
  wall time is instant + offset, so the search runs segment by segment.
"""

from __future__ import annotations

import abc
from datetime import date

from celery_hashbeat.expr.days import DayMatcher, day_matcher, month_length
from celery_hashbeat.expr.errors import NoFireTimeError
from celery_hashbeat.expr.fields import Resolved, next_table, prev_table
from celery_hashbeat.expr.zones import Segment, Zone

DAY = 86400
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
FIRST_DAY = date.min.toordinal() - EPOCH_ORDINAL
LAST_DAY = date.max.toordinal() - EPOCH_ORDINAL
# Wall patterns repeat every 400 years and zone rules yearly: a search this long that finds
# nothing never will.
HORIZON = 401 * 366 * DAY


class WallClock:
    """Matching wall times of one resolved expression; shared by equal expressions."""

    __slots__ = (
        "_days",
        "_first_time",
        "_hours_next",
        "_hours_prev",
        "_last_time",
        "_minutes_next",
        "_minutes_prev",
        "_month",
        "_months_next",
        "_months_prev",
        "_seconds_next",
        "_seconds_prev",
    )

    def __init__(self, resolved: Resolved) -> None:
        self._seconds_next = next_table(resolved.seconds, 59)
        self._seconds_prev = prev_table(resolved.seconds, 59)
        self._minutes_next = next_table(resolved.minutes, 59)
        self._minutes_prev = prev_table(resolved.minutes, 59)
        self._hours_next = next_table(resolved.hours, 23)
        self._hours_prev = prev_table(resolved.hours, 23)
        self._months_next = next_table(resolved.months, 12)
        self._months_prev = prev_table(resolved.months, 12)
        self._days: DayMatcher = day_matcher(resolved.day)
        self._first_time = (
            min(resolved.hours) * 3600 + min(resolved.minutes) * 60 + min(resolved.seconds)
        )
        self._last_time = (
            max(resolved.hours) * 3600 + max(resolved.minutes) * 60 + max(resolved.seconds)
        )
        #: The last month searched: (its first day, the day after its last, its day mask).
        #: Consecutive questions mostly fall in one month, which then costs a bit test.
        self._month = (0, 0, 0)

    def next_at_or_after(self, wall: int) -> int:
        """The first matching wall time >= ``wall``."""
        days, second = divmod(wall, DAY)
        first, end, mask = self._month
        if first <= days < end:
            later = mask >> (days - first + 1)
            if later & 1:
                time = self._time_at_or_after(second)
                if time >= 0:
                    return days * DAY + time
                later &= ~1
            if later:
                return (days + (later & -later).bit_length() - 1) * DAY + self._first_time
            days, second = end, 0
        return self._search_forward(days, second)

    def prev_at_or_before(self, wall: int) -> int:
        """The last matching wall time <= ``wall``."""
        days, second = divmod(wall, DAY)
        first, end, mask = self._month
        if first <= days < end:
            today = days - first + 1
            earlier = mask & ((2 << today) - 1)
            if (earlier >> today) & 1:
                time = self._time_at_or_before(second)
                if time >= 0:
                    return days * DAY + time
                earlier &= ~(1 << today)
            if earlier:
                return (first + earlier.bit_length() - 2) * DAY + self._last_time
            days, second = first - 1, DAY - 1
        return self._search_backward(days, second)

    def _month_mask(self, days: int, year: int, month: int, day: int) -> int:
        first = days - day + 1
        length = month_length(year, month)
        mask = self._days.month_mask(length, (first + 4) % 7)
        self._month = (first, first + length, mask)
        return mask

    def _search_forward(self, days: int, second: int) -> int:
        while days <= LAST_DAY:
            when = date.fromordinal(days + EPOCH_ORDINAL)
            year, month, day = when.year, when.month, when.day
            allowed = self._months_next[month]
            if allowed != month:
                days = (
                    _first_of_month(year, allowed) if allowed > 0 else _first_of_month(year + 1, 1)
                )
                second = 0
                continue
            later = self._month_mask(days, year, month, day) >> day
            if not later:
                days += month_length(year, month) - day + 1
                second = 0
                continue
            skip = (later & -later).bit_length() - 1
            if skip:
                days += skip
                second = 0
            time = self._time_at_or_after(second)
            if time >= 0:
                return days * DAY + time
            days += 1
            second = 0
        raise NoFireTimeError("no fire time before the year 10000")

    def _search_backward(self, days: int, second: int) -> int:
        while days >= FIRST_DAY:
            when = date.fromordinal(days + EPOCH_ORDINAL)
            year, month, day = when.year, when.month, when.day
            allowed = self._months_prev[month]
            if allowed != month:
                if allowed > 0:
                    days = _first_of_month(year, allowed) + month_length(year, allowed) - 1
                else:
                    days = _first_of_month(year, 1) - 1
                second = DAY - 1
                continue
            earlier = self._month_mask(days, year, month, day) & ((2 << day) - 1)
            if not earlier:
                days -= day
                second = DAY - 1
                continue
            skip = day - (earlier.bit_length() - 1)
            if skip:
                days -= skip
                second = DAY - 1
            time = self._time_at_or_before(second)
            if time >= 0:
                return days * DAY + time
            days -= 1
            second = DAY - 1
        raise NoFireTimeError("no fire time after the year 1")

    def _time_at_or_after(self, second_of_day: int) -> int:
        """The first matching second of the day >= the given one, or -1."""
        hour, rest = divmod(second_of_day, 3600)
        minute, second = divmod(rest, 60)
        hours, minutes, seconds = self._hours_next, self._minutes_next, self._seconds_next
        if hours[hour] == hour:
            if minutes[minute] == minute:
                found = seconds[second]
                if found >= 0:
                    return second_of_day - second + found
                minute += 1
            found = minutes[minute]
            if found >= 0:
                return hour * 3600 + found * 60 + seconds[0]
            hour += 1
        found = hours[hour]
        if found < 0:
            return -1
        return found * 3600 + (self._first_time % 3600)

    def _time_at_or_before(self, second_of_day: int) -> int:
        """The last matching second of the day <= the given one, or -1."""
        hour, rest = divmod(second_of_day, 3600)
        minute, second = divmod(rest, 60)
        hours, minutes, seconds = self._hours_prev, self._minutes_prev, self._seconds_prev
        if hours[hour] == hour:
            if minutes[minute] == minute:
                found = seconds[second]
                if found >= 0:
                    return second_of_day - second + found
                minute -= 1
            found = minutes[minute] if minute >= 0 else -1
            if found >= 0:
                return hour * 3600 + found * 60 + seconds[59]
            hour -= 1
        found = hours[hour] if hour >= 0 else -1
        if found < 0:
            return -1
        return found * 3600 + (self._last_time % 3600)


def _first_of_month(year: int, month: int) -> int:
    if year > 9999:
        return LAST_DAY + 1
    return date(year, month, 1).toordinal() - EPOCH_ORDINAL


class Timing(abc.ABC):
    """Fire instants of a wall clock in a zone; ``timing_for`` picks the subclass for the zone
    and the kind of job once, so a call goes straight to its rule."""

    __slots__ = ("_wall", "_zone")

    def __init__(self, wall: WallClock, zone: Zone) -> None:
        self._wall = wall
        self._zone = zone

    @abc.abstractmethod
    def next_at_or_after(self, start: int) -> int:
        """The first fire instant >= ``start``."""

    @abc.abstractmethod
    def prev_at_or_before(self, end: int) -> int:
        """The last fire instant <= ``end``."""


def timing_for(wall: WallClock, zone: Zone, fixed_time: bool) -> Timing:
    if zone.fixed:
        return ConstantOffset(wall, zone)
    return FixedTime(wall, zone) if fixed_time else RealInstants(wall, zone)


class ConstantOffset(Timing):
    """A zone without transitions: wall time is the instant plus one offset."""

    __slots__ = ()

    def next_at_or_after(self, start: int) -> int:
        offset = self._zone.fixed_offset
        return self._wall.next_at_or_after(start + offset) - offset

    def prev_at_or_before(self, end: int) -> int:
        offset = self._zone.fixed_offset
        return self._wall.prev_at_or_before(end + offset) - offset


class RealInstants(Timing):
    """Fires at the instants whose wall time matches: never in a gap, twice in a repeat.
    Inside one offset segment wall time is instant + offset, so the search goes by segments."""

    __slots__ = ()

    def next_at_or_after(self, start: int) -> int:
        segment, limit = self._zone.segment(start), start + HORIZON
        while segment.start <= limit:
            found = self._wall.next_at_or_after(start + segment.offset) - segment.offset
            if found < segment.end:
                return found
            start = segment.end
            segment = self._zone.segment(start)
        raise NoFireTimeError("no matching time exists in this time zone")

    def prev_at_or_before(self, end: int) -> int:
        segment, limit = self._zone.segment(end), end - HORIZON
        while segment.end >= limit:
            found = self._wall.prev_at_or_before(end + segment.offset) - segment.offset
            if found >= segment.start:
                return found
            end = segment.start - 1
            segment = self._zone.segment(end)
        raise NoFireTimeError("no matching time exists in this time zone")


class FixedTime(Timing):
    """Debian cron's rule for jobs at a fixed time of day: each matching wall time fires once,
    at its first instant, and one in a spring-forward gap fires at the gap's end. That map never
    decreases, so the first matching wall time past the start's is the answer."""

    __slots__ = ()

    def next_at_or_after(self, start: int) -> int:
        before = start - 1
        segment = self._zone.segment(before)
        wall = before + segment.offset + 1
        if _repeats_into(segment, before):
            wall = max(wall, segment.start + segment.previous)
        found = self._wall.next_at_or_after(wall)
        while True:
            if found - segment.offset < segment.end:
                return found - segment.offset
            following = self._zone.segment(segment.end)
            if found < segment.end + following.offset:
                return segment.end
            segment = following

    def prev_at_or_before(self, end: int) -> int:
        segment = self._zone.segment(end)
        wall = end + segment.offset
        if _repeats_into(segment, end):
            wall = segment.start + segment.previous - 1
        found = self._wall.prev_at_or_before(wall)
        while True:
            first_shown_here = not (
                segment.previous > segment.offset and found < segment.start + segment.previous
            )
            if found - segment.offset >= segment.start and first_shown_here:
                return found - segment.offset
            if segment.previous < segment.offset and found >= segment.start + segment.previous:
                return segment.start
            segment = self._zone.segment(segment.start - 1)


def _repeats_into(segment: Segment, instant: int) -> bool:
    """Whether ``instant`` shows a wall time a second time, after a fall-back transition."""
    fall = segment.previous - segment.offset
    return fall > 0 and instant < segment.start + fall
