"""Exclusion calendars: the days a schedule does not fire on (docs/design.md §20).

An ``exclude`` list is text (``"2026-12-25"``, ``"2026-12-24..2026-12-31"``, ``"*-12-25"``,
``"sat,sun"``, ``"holidays:US"``, ``"ical:/path/file.ics"``), parsed once into plain data, a
``Calendar``. Whether a day is excluded is a set lookup: the excluded days of a year are put in
one set the first time a day of that year is asked about, which is also the only time the
``holidays`` package is asked (files are read when the calendar is parsed). No Celery here.
"""

from __future__ import annotations

import calendar as calendar_module
import hashlib
import importlib
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from datetime import date
from typing import Any

from celery_hashbeat.expr.errors import CalendarError
from celery_hashbeat.expr.ical import read_ical

#: Weekday names (Monday is 0, as ``date.weekday`` counts).
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")

#: How far a calendar is searched for a day it does not exclude before it is said to exclude
#: every day (ten years: a range longer than that is a mistake, not a calendar).
HORIZON_DAYS = 3660

#: What each ``on_excluded`` value does with a slot on an excluded day.
ON_EXCLUDED = ("skip", "next_business_day", "previous_business_day")

HOLIDAYS_EXTRA = (
    "the 'holidays' package is not installed: install celery-hashbeat[holidays] "
    "(pip install 'celery-hashbeat[holidays]') to exclude {spec!r}"
)


class Calendar:
    """The days excluded by one ``exclude`` list, as ordinals (``date.toordinal``)."""

    __slots__ = (
        "_high",
        "_low",
        "_ordered",
        "_set",
        "_sorted",
        "_years",
        "dates",
        "holiday_sets",
        "identity",
        "ranges",
        "specs",
        "weekdays",
        "yearly",
    )

    def __init__(
        self,
        specs: tuple[str, ...],
        dates: frozenset[int] = frozenset(),
        ranges: tuple[tuple[int, int], ...] = (),
        yearly: frozenset[tuple[int, int]] = frozenset(),
        weekdays: frozenset[int] = frozenset(),
        holiday_sets: tuple[tuple[str, str | None], ...] = (),
        identity: tuple[str, ...] | None = None,
    ) -> None:
        #: The text it was parsed from, in order: what the views show.
        self.specs = specs
        #: What the fingerprint covers: the texts, each ``ical:`` one with a digest of the days
        #: its file gave, so that a changed file is a changed schedule (docs/design.md §20).
        self.identity = specs if identity is None else identity
        self.dates, self.ranges, self.yearly = dates, ranges, yearly
        self.weekdays, self.holiday_sets = weekdays, holiday_sets
        self._years: dict[int, frozenset[int]] = {}
        #: Each year's excluded days in order.
        self._ordered: dict[int, list[int]] = {}
        # The year asked last: [low, high) ordinals, its set and its days in order, so most
        # lookups are one test.
        self._low, self._high, self._set = 0, 0, frozenset[int]()
        self._sorted: list[int] = []

    def excluded(self, ordinal: int) -> bool:
        """Whether the day ``ordinal`` is excluded."""
        if self._low <= ordinal < self._high:
            return ordinal in self._set
        year = date.fromordinal(ordinal).year
        days = self._years.get(year)
        if days is None:
            days = self._years[year] = self._year(year)
            self._ordered[year] = sorted(days)
        self._low = date(year, 1, 1).toordinal()
        self._high = date(year + 1, 1, 1).toordinal() if year < 9999 else 10**7
        self._set, self._sorted = days, self._ordered[year]
        return ordinal in days

    def open_runs(self, ordinal: int, limit: int) -> list[tuple[int, int]]:
        """The runs of days it does not exclude from ``ordinal`` up to ``limit``, in order, as
        [first, end) pairs (the last may end at ``limit``): read off the excluded days in
        order, not day by day."""
        runs, first = [], ordinal
        while ordinal < limit:
            if not self._low <= ordinal < self._high:
                self.excluded(ordinal)  # its year becomes the one asked last
            days, high = self._sorted, min(self._high, limit)
            at = bisect_left(days, ordinal)
            while at < len(days) and days[at] < high:
                if days[at] > first:
                    runs.append((first, days[at]))
                first, at = days[at] + 1, at + 1
            ordinal = high
        if first < limit:
            runs.append((first, limit))
        return runs

    def next_open(self, ordinal: int, step: int = 1) -> int:
        """The first day from ``ordinal`` (itself included) in direction ``step`` that is not
        excluded; CalendarError if none is within HORIZON_DAYS."""
        for _ in range(HORIZON_DAYS):
            if self._low <= ordinal < self._high:  # the year asked last: a set lookup
                if ordinal not in self._set:
                    return ordinal
            elif not self.excluded(ordinal):
                return ordinal
            ordinal += step
        raise CalendarError(
            f"the calendar {list(self.specs)} excludes every day for {HORIZON_DAYS} days from "
            f"{date.fromordinal(ordinal - step * HORIZON_DAYS)}: it never fires; remove an "
            f"exclude entry or shorten a range"
        )

    def _year(self, year: int) -> frozenset[int]:
        """Every excluded day of ``year``: built once, then only looked up."""
        low = date(year, 1, 1).toordinal()
        high = date(year + 1, 1, 1).toordinal() if year < 9999 else low + 365
        days = {day for day in self.dates if low <= day < high}
        for first, last in self.ranges:
            days.update(range(max(first, low), min(last + 1, high)))
        for month, day in self.yearly:
            if month != 2 or day != 29 or calendar_module.isleap(year):  # no 29 Feb: nothing
                days.add(date(year, month, day).toordinal())
        if self.weekdays:
            start = date(year, 1, 1).weekday()
            days.update(o for o in range(low, high) if (start + o - low) % 7 in self.weekdays)
        for country, subdivision in self.holiday_sets:
            days.update(d.toordinal() for d in holiday_dates(country, subdivision, year))
        return frozenset(days)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Calendar) and self.identity == other.identity

    def __hash__(self) -> int:
        return hash(self.identity)

    def __repr__(self) -> str:
        return f"Calendar({list(self.specs)!r})"


def parse_calendar(specs: Iterable[str] | str) -> Calendar:
    """An ``exclude`` list (or one entry) as a Calendar; CalendarError names the bad entry."""
    if isinstance(specs, str):
        specs = [specs]
    texts: list[str] = []
    identity: list[str] = []
    dates: set[int] = set()
    ranges: list[tuple[int, int]] = []
    yearly: set[tuple[int, int]] = set()
    weekdays: set[int] = set()
    holiday_sets: list[tuple[str, str | None]] = []
    for raw in specs:
        if not isinstance(raw, str) or not raw.strip():
            raise CalendarError(
                f"exclude entry {raw!r}: write a date (2026-12-25), a range "
                f"(2026-12-24..2026-12-31), a yearly date (*-12-25), weekdays (sat,sun), "
                f"holidays:US or ical:/path/file.ics"
            )
        spec = raw.strip()
        texts.append(spec)
        identity.append(spec)
        lower = spec.lower()
        if lower.startswith("holidays:"):
            holiday_sets.append(_holiday_set(spec))
        elif lower.startswith("ical:"):
            days, spans, every_year = read_ical(spec[5:], spec)
            dates.update(days)
            ranges.extend(spans)
            yearly.update(every_year)
            read = repr((sorted(days), sorted(spans), sorted(every_year)))
            identity[-1] += "#" + hashlib.sha256(read.encode()).hexdigest()[:16]
        elif ".." in spec and spec.startswith("*-"):
            yearly.update(_yearly_range(spec))
        elif ".." in spec:
            first, _, last = spec.partition("..")
            low, high = _date(first, spec), _date(last, spec)
            if high < low:
                raise CalendarError(f"exclude range {spec!r}: its end comes before its start")
            ranges.append((low, high))
        elif spec.startswith("*-"):
            yearly.add(_month_day(spec))
        elif spec[0].isdigit():
            dates.add(_date(spec, spec))
        else:
            weekdays.update(_weekdays(spec))
    if len(weekdays) == 7:
        raise CalendarError(
            f"exclude {texts}: every weekday is excluded, so it never fires; leave at least "
            f"one day of the week"
        )
    return Calendar(
        tuple(texts),
        frozenset(dates),
        tuple(sorted(ranges)),
        frozenset(yearly),
        frozenset(weekdays),
        tuple(holiday_sets),
        tuple(identity),
    )


def check_on_excluded(value: Any) -> str:
    """An ``on_excluded`` value, checked."""
    if value is None:
        return "skip"
    if value not in ON_EXCLUDED:
        raise CalendarError(
            f"on_excluded must be one of {', '.join(repr(v) for v in ON_EXCLUDED)}, not {value!r}"
        )
    return str(value)


def holiday_dates(country: str, subdivision: str | None, year: int) -> Sequence[date]:
    """The holidays of ``country`` (and ``subdivision``) in ``year``, from the holidays package."""
    module: Any = importlib.import_module("holidays")
    return list(module.country_holidays(country, subdiv=subdivision, years=year))


def _holiday_set(spec: str) -> tuple[str, str | None]:
    code = spec.split(":", 1)[1].strip()
    country, _, subdivision = code.partition("-")
    try:
        module: Any = importlib.import_module("holidays")
    except ImportError:
        raise CalendarError(HOLIDAYS_EXTRA.format(spec=spec)) from None
    supported: dict[str, list[str]] = module.list_supported_countries()
    if country.upper() not in supported:
        raise CalendarError(
            f"exclude {spec!r}: the holidays package knows no country {country!r}; use an "
            f"ISO 3166 code such as holidays:US or holidays:DE-BY"
        )
    country = country.upper()
    if subdivision and subdivision.upper() not in {s.upper() for s in supported[country]}:
        known = ", ".join(supported[country][:12])
        raise CalendarError(
            f"exclude {spec!r}: {country} has no subdivision {subdivision!r}; known: {known}..."
        )
    if subdivision:
        wanted = subdivision.upper()
        subdivision = next(s for s in supported[country] if s.upper() == wanted)
    return country, subdivision or None


def _date(text: str, spec: str) -> int:
    try:
        return date.fromisoformat(text.strip()).toordinal()
    except ValueError:
        raise CalendarError(
            f"exclude {spec!r}: {text.strip()!r} is not a date; write YYYY-MM-DD, such as "
            f"2026-12-25"
        ) from None


def _month_day(spec: str) -> tuple[int, int]:
    try:
        # 2024 is a leap year, so *-02-29 is accepted (it excludes nothing in other years).
        found = date.fromisoformat("2024" + spec[1:])
    except ValueError:
        raise CalendarError(
            f"exclude {spec!r}: a yearly date is *-MM-DD, such as *-12-25"
        ) from None
    return found.month, found.day


def _yearly_range(spec: str) -> set[tuple[int, int]]:
    """Every (month, day) of a yearly range such as ``*-12-24..*-12-26`` (it may wrap the new
    year: ``*-12-31..*-01-01``)."""
    first, _, last = spec.partition("..")
    if not last.strip().startswith("*-"):
        raise CalendarError(f"exclude {spec!r}: a yearly range is *-MM-DD..*-MM-DD")
    low = date(2024, *_month_day(first.strip())).toordinal()
    high = date(2024, *_month_day(last.strip())).toordinal()
    if high < low:
        high += 366
    found = set()
    for ordinal in range(low, high + 1):
        day = date.fromordinal(ordinal if ordinal < date(2025, 1, 1).toordinal() else ordinal - 366)
        found.add((day.month, day.day))
    return found


def _weekdays(spec: str) -> set[int]:
    found: set[int] = set()
    for part in spec.lower().split(","):
        first, _, last = part.strip().partition("-")
        low, high = _weekday(first), _weekday(last or first)
        if low < 0 or high < 0:
            raise CalendarError(
                f"exclude {spec!r}: {part.strip()!r} is neither a date nor a weekday; weekdays "
                f"are {','.join(WEEKDAYS)} (a list like sat,sun or a range like mon-fri)"
            )
        found.update(day % 7 for day in range(low, high + 1 if high >= low else high + 8))
    return found


def _weekday(text: str) -> int:
    """A weekday's number for its name or its first three letters; -1 for anything else."""
    text = text.strip()
    names = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    for number, name in enumerate(names):
        if len(text) >= 3 and name.startswith(text):
            return number
    return -1
