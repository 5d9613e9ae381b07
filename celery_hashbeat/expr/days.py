"""Which days of a month fire, as a bit mask (bit d set: day d fires).

A month's matching days depend only on its length and the weekday of its 1st, so a month is a
handful of integer operations and "the next matching day" is a bit scan, never a day-by-day walk.
Weekdays count from 0 = Sunday, as cron does.
"""

from __future__ import annotations

from functools import lru_cache

from celery_hashbeat.expr.fields import DaySpec, day_bits, weekday_masks

SATURDAY, SUNDAY = 6, 0
MONTH_LENGTHS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def month_length(year: int, month: int) -> int:
    if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0):
        return 29
    return MONTH_LENGTHS[month]


class DayMatcher:
    """A DaySpec compiled to bit masks; shared by every expression with the same day fields."""

    __slots__ = ("_dom", "_dow", "_masks", "_spec")

    def __init__(self, spec: DaySpec) -> None:
        self._spec = spec
        self._dom = day_bits(spec.days)
        self._dow = weekday_masks(spec.weekdays)
        self._masks: dict[int, int] = {}

    def month_mask(self, length: int, first_weekday: int) -> int:
        """The days of a month of ``length`` days whose 1st falls on ``first_weekday``."""
        shape = length * 8 + first_weekday
        mask = self._masks.get(shape)
        if mask is None:
            mask = self._masks[shape] = self._compute(length, first_weekday)
        return mask

    def _compute(self, length: int, first_weekday: int) -> int:
        spec = self._spec
        valid = (1 << (length + 1)) - 2
        by_date = self._dom
        if spec.last_day:
            by_date |= 1 << length
        if spec.last_weekday:
            by_date |= 1 << _weekday_nearest(length, length, first_weekday)
        for day in spec.nearest_weekdays:
            if day <= length:
                by_date |= 1 << _weekday_nearest(day, length, first_weekday)
        by_weekday = self._dow[first_weekday]
        for weekday in spec.last_weekdays_of:
            by_weekday |= 1 << (length - (first_weekday + length - 1 - weekday) % 7)
        for weekday, nth in spec.nth_weekdays:
            day = 1 + (weekday - first_weekday) % 7 + 7 * (nth - 1)
            if day <= length:
                by_weekday |= 1 << day
        if spec.both_must_match:
            return by_date & by_weekday & valid
        return (by_date | by_weekday) & valid


def _weekday_nearest(day: int, length: int, first_weekday: int) -> int:
    """The Monday-to-Friday day nearest ``day``, never leaving the month (Quartz's ``W``)."""
    weekday = (first_weekday + day - 1) % 7
    if weekday == SATURDAY:
        return day - 1 if day > 1 else day + 2
    if weekday == SUNDAY:
        return day + 1 if day < length else day - 2
    return day


@lru_cache(maxsize=4096)
def day_matcher(spec: DaySpec) -> DayMatcher:
    return DayMatcher(spec)


@lru_cache(maxsize=4096)
def can_ever_fire(day: DaySpec, months: frozenset[int]) -> bool:
    """Whether some month of some year has a matching day.

    Over the 400-year Gregorian cycle every month starts on every weekday, February with both
    of its lengths, so trying each (month, length, first weekday) is exhaustive.
    """
    matcher = day_matcher(day)
    for month in months:
        lengths = (28, 29) if month == 2 else (MONTH_LENGTHS[month],)
        for length in lengths:
            if any(matcher.month_mask(length, first) for first in range(7)):
                return True
    return False


@lru_cache(maxsize=4096)
def every_day(day: DaySpec) -> bool:
    """Whether the day fields match every day of every month: then a schedule fires at the same
    wall times each day. Every (length, first weekday) shape of a month is tried."""
    matcher = day_matcher(day)
    return all(
        matcher.month_mask(length, first) == (1 << (length + 1)) - 2
        for length in (28, 29, 30, 31)
        for first in range(7)
    )
