"""Random walks of ``CalendarSlots`` against a reference that is obviously right (docs/design.md
§20): every slot of the plain schedule over the weeks around the walk, each on a closed day
dropped or put on the nearest open day at the same wall time, once each; ``next_after`` must
answer the first of those past the instant asked. Which days are closed comes from the
``holidays`` package and ``date.weekday``, never from ``Calendar``. Walks mix daily schedules
(whose moved slots are found without walking the closed days), schedules that differ by day,
intervals, zones with daylight saving (a half-hour one too) and runs of closed days."""

from __future__ import annotations

import random
from bisect import bisect_right
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import holidays
import pytest

from celery_hashbeat.expr import parse
from celery_hashbeat.expr.calendar import parse_calendar
from celery_hashbeat.expr.slots import (
    CalendarSlots,
    CronSlots,
    IntervalSlots,
    Slots,
    to_datetime,
    to_ms,
)

EXPRESSIONS = [
    "H 9 * * *",
    "H/15 H(9-16) * * *",
    "*/5 * * * *",
    "H H * * *",
    "30 2 * * *",  # in the spring gap once a year
    "0 1-3 * * *",  # in the autumn repeat
    "59 23 * * *",
    "0 */7 * * *",
    "H H * * mon,wed",
    "0 9 1,15 * *",
    "H 2 * 3,10 *",
    "0 0 L * *",
]
INTERVALS_S = [3600, 900, 86400, 7 * 3600, 1800]
ZONES = ["America/New_York", "Europe/Berlin", "UTC", "Australia/Lord_Howe", "Asia/Kolkata"]
HOLIDAY_SETS = [("US", None), ("DE", "BY")]
MODES = ["skip", "next_business_day", "previous_business_day"]
#: How far a slot may move: past the longest run of closed days a case makes.
MARGIN_DAYS = 40


def random_case(rng: random.Random) -> tuple[Slots, Slots, ZoneInfo, list[str], set[date], str]:
    """A schedule (twice: one to wrap, one for the reference), its zone, an exclude list and the
    days it closes (worked out without Calendar), and a mode."""
    zone = rng.choice(ZONES)
    tz = ZoneInfo(zone)
    if rng.random() < 0.3:
        period_ms = rng.choice(INTERVALS_S) * 1000
        offset_ms = rng.randrange(period_ms)
        inner: Slots = IntervalSlots(period_ms, offset_ms)
        plain: Slots = IntervalSlots(period_ms, offset_ms)
    else:
        text, key = rng.choice(EXPRESSIONS), f"walk{rng.randrange(1000)}"
        # Now and then the expression has a zone of its own (days are still the calendar's).
        own = tz if rng.random() < 0.8 else ZoneInfo(rng.choice(ZONES))
        inner = CronSlots(parse(text, key=key, tz=own))
        plain = CronSlots(parse(text, key=key, tz=own))
    years = range(2025, 2030)
    specs: list[str] = []
    closed: set[date] = set()
    first, last = date(2025, 1, 1), date(2029, 12, 31)
    every_day = [first + timedelta(days=n) for n in range((last - first).days + 1)]
    if rng.random() < 0.8:
        weekdays = rng.choice([(5, 6), (6,), (0, 4), (2,)])
        names = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
        specs.append(",".join(names[day] for day in weekdays))
        closed |= {day for day in every_day if day.weekday() in weekdays}
    if rng.random() < 0.7:
        country, subdivision = rng.choice(HOLIDAY_SETS)
        specs.append(f"holidays:{country}" + (f"-{subdivision}" if subdivision else ""))
        closed |= set(holidays.country_holidays(country, subdiv=subdivision, years=years))
    for _ in range(rng.randrange(4)):
        start = date(2027, 1, 1) + timedelta(days=rng.randrange(730))
        length = rng.choice([1, 1, 2, 3, 9])
        specs.append(f"{start}..{start + timedelta(days=length - 1)}")
        closed |= {start + timedelta(days=n) for n in range(length)}
    for change in ("2027-03-14", "2027-03-28", "2027-10-31", "2027-04-04", "2027-11-07"):
        if rng.random() < 0.3:  # days on which clocks change, closed
            specs.append(change)
            closed.add(date.fromisoformat(change))
    if not specs:
        specs.append("sat")
        closed |= {day for day in every_day if day.weekday() == 5}
    return inner, plain, tz, specs, closed, rng.choice(MODES)


def reference(
    plain: Slots, tz: ZoneInfo, closed: set[date], mode: str, low: datetime, high: datetime
) -> list[int]:
    """Every slot from ``low`` to ``high`` (and a margin), by hand."""
    step = {"skip": 0, "next_business_day": 1, "previous_business_day": -1}[mode]
    found: set[int] = set()
    ms = to_ms(low - timedelta(days=MARGIN_DAYS))
    end = to_ms(high + timedelta(days=MARGIN_DAYS))
    while (ms := plain.next_after(ms)) < end:
        local = to_datetime(ms).astimezone(tz)
        day = local.date()
        if day not in closed:
            found.add(ms)
        elif step:
            while day in closed:
                day += timedelta(days=step)
            moved = datetime.combine(day, local.time(), tzinfo=tz).replace(fold=local.fold)
            found.add(to_ms(moved))
    return sorted(found)


@pytest.mark.parametrize("seed", range(12))
def test_random_walks_answer_as_the_reference_does(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(20):
        inner, plain, tz, specs, closed, mode = random_case(rng)
        slots = CalendarSlots(inner, parse_calendar(specs), tz, mode)
        low = datetime(2027, 1, 1, tzinfo=tz) + timedelta(hours=rng.randrange(24 * 640))
        high = low + timedelta(days=60)
        expected = reference(plain, tz, closed, mode, low, high)
        # Past this the reference may lack a slot moved back from beyond its margin.
        sure = to_ms(high + timedelta(days=MARGIN_DAYS // 2))
        ms = to_ms(low)
        for _ in range(rng.choice([10, 60, 300])):
            if rng.random() < 0.05:  # a jump, as a catch-up or a view asks
                ms = max(to_ms(low), ms + rng.randrange(-7 * 86400_000, 7 * 86400_000))
            if ms >= to_ms(high):
                break
            answer = slots.next_after(ms)
            at = bisect_right(expected, ms)
            if at < len(expected) and expected[at] < sure:
                assert answer == expected[at], (specs, mode, inner, ms)
            else:
                assert answer >= sure, (specs, mode, inner, ms)
                break
            ms = answer if rng.random() < 0.9 else answer - rng.randrange(1, 3600_000)


@pytest.mark.parametrize("mode", MODES)
def test_an_expression_in_another_zone_keeps_its_own_clock_changes(mode: str) -> None:
    # Days are New York's; the expression fires at 06:30 Berlin time. Berlin's clocks change
    # on Sunday 28 March 2027, two weeks after New York's, so a weekend's slots are not the
    # Monday's own in New York time: they must be asked of the expression, not shifted.
    tz = ZoneInfo("America/New_York")
    slots = CalendarSlots(
        CronSlots(parse("30 6 * * *", tz="Europe/Berlin")), parse_calendar("sat,sun"), tz, mode
    )
    plain = CronSlots(parse("30 6 * * *", tz="Europe/Berlin"))
    closed = {date(2027, 3, 1) + timedelta(days=n) for n in range(-40, 80)}
    closed = {day for day in closed if day.weekday() >= 5}
    low, high = datetime(2027, 3, 1, tzinfo=tz), datetime(2027, 4, 20, tzinfo=tz)
    expected = [
        ms for ms in reference(plain, tz, closed, mode, low, high) if to_ms(low) < ms < to_ms(high)
    ]

    found, ms = [], to_ms(low)
    while (ms := slots.next_after(ms)) < to_ms(high):
        found.append(ms)

    assert found == expected
