"""Exclusion calendars (docs/design.md §20) in the engine: the exclude texts, the days they
exclude, and the slots of a schedule with a calendar (skipped, moved to the next or previous open
day). The ``holidays`` package itself is the oracle for a year of slots; days are counted in the
schedule's own zone."""

from __future__ import annotations

import subprocess
import sys
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import holidays
import pytest

from celery_hashbeat.expr import parse
from celery_hashbeat.expr.calendar import parse_calendar
from celery_hashbeat.expr.errors import CalendarError, NoFireTimeError
from celery_hashbeat.expr.slots import CalendarSlots, CronSlots, IntervalSlots, to_datetime, to_ms

NEW_YORK = ZoneInfo("America/New_York")
MUNICH = ZoneInfo("Europe/Berlin")


def year_of_slots(slots: CalendarSlots, year: int, tz: ZoneInfo) -> list[datetime]:
    """Every slot of ``year`` (local times), by asking next_after over and over."""
    found, ms = [], to_ms(datetime(year, 1, 1, tzinfo=tz)) - 1
    end = to_ms(datetime(year + 1, 1, 1, tzinfo=tz))
    while (ms := slots.next_after(ms)) < end:
        found.append(to_datetime(ms).astimezone(tz))
    return found


def days_of(year: int) -> list[date]:
    first = date(year, 1, 1)
    return [first + timedelta(days=n) for n in range((date(year + 1, 1, 1) - first).days)]


@pytest.mark.parametrize(
    ("spec", "tz", "country", "subdivision"),
    [("holidays:US", NEW_YORK, "US", None), ("holidays:DE-BY", MUNICH, "DE", "BY")],
)
def test_a_year_of_slots_skips_exactly_the_holidays_and_weekends_the_package_names(
    spec: str, tz: ZoneInfo, country: str, subdivision: str | None
) -> None:
    slots = CalendarSlots(
        CronSlots(parse("H 9 * * *", key="report", tz=tz)), parse_calendar([spec, "sat,sun"]), tz
    )
    oracle = holidays.country_holidays(country, subdiv=subdivision, years=2027)
    expected = [d for d in days_of(2027) if d not in oracle and d.weekday() < 5]

    fired = year_of_slots(slots, 2027, tz)

    assert [moment.date() for moment in fired] == expected
    assert {(moment.hour, moment.minute) for moment in fired} == {(9, fired[0].minute)}


def test_next_business_day_moves_a_monthly_slot_to_the_first_open_day_keeping_its_time() -> None:
    calendar = parse_calendar(["holidays:DE-BY", "sat,sun"])
    slots = CalendarSlots(
        CronSlots(parse("30 7 1 * *", tz=MUNICH)), calendar, MUNICH, "next_business_day"
    )
    oracle = holidays.country_holidays("DE", subdiv="BY", years=2027)

    def first_open(day: date) -> date:
        while day in oracle or day.weekday() >= 5:
            day += timedelta(days=1)
        return day

    fired = year_of_slots(slots, 2027, MUNICH)

    assert [m.date() for m in fired] == [first_open(date(2027, month, 1)) for month in range(1, 13)]
    assert {(m.hour, m.minute) for m in fired} == {(7, 30)}
    assert date(2027, 1, 1) in oracle  # the first of January really is moved


def test_previous_business_day_moves_a_slot_back_to_the_last_open_day() -> None:
    calendar = parse_calendar(["holidays:US", "sat,sun"])
    slots = CalendarSlots(
        CronSlots(parse("0 17 15 * *", tz=NEW_YORK)), calendar, NEW_YORK, "previous_business_day"
    )
    oracle = holidays.country_holidays("US", years=2027)

    def last_open(day: date) -> date:
        while day in oracle or day.weekday() >= 5:
            day -= timedelta(days=1)
        return day

    fired = year_of_slots(slots, 2027, NEW_YORK)

    assert [m.date() for m in fired] == [last_open(date(2027, month, 15)) for month in range(1, 13)]
    assert {(m.hour, m.minute) for m in fired} == {(17, 0)}


@pytest.mark.parametrize("mode", ["next_business_day", "previous_business_day"])
def test_moved_slots_never_land_on_one_instant_with_another_slot(mode: str) -> None:
    # Every day at 09:00 with weekends excluded: Saturday's and Sunday's slots both move to the
    # 09:00 that Monday (or Friday) has already; one slot stays.
    slots = CalendarSlots(
        CronSlots(parse("0 9 * * *", tz=MUNICH)), parse_calendar("sat,sun"), MUNICH, mode
    )
    fired = year_of_slots(slots, 2027, MUNICH)

    assert len(fired) == len(set(fired)) == sum(1 for d in days_of(2027) if d.weekday() < 5)
    assert fired == sorted(fired)


def test_a_moved_slot_keeps_its_time_of_day_across_a_daylight_saving_change() -> None:
    # 2027-03-27 is a Saturday in Munich; clocks go forward on Sunday the 28th. A 09:15 slot on
    # the Saturday, moved to Monday the 29th, still fires at 09:15 local time.
    slots = CalendarSlots(
        CronSlots(parse("15 9 27 3 *", tz=MUNICH)),
        parse_calendar("sat,sun"),
        MUNICH,
        "next_business_day",
    )
    moved = to_datetime(slots.next_after(to_ms(datetime(2027, 3, 1, tzinfo=MUNICH))))
    assert moved.astimezone(MUNICH).replace(tzinfo=None) == datetime(2027, 3, 29, 9, 15)


def test_days_are_counted_in_the_schedules_zone() -> None:
    # Every six hours; 2027-07-04 excluded. In New York that day runs 04:00Z..04:00Z next day.
    interval = IntervalSlots(6 * 3600_000, 0)
    slots = CalendarSlots(interval, parse_calendar("2027-07-04"), NEW_YORK)
    start = to_ms(datetime(2027, 7, 3, 23, tzinfo=NEW_YORK))
    local = [
        to_datetime(s).astimezone(NEW_YORK) for s in slots.recent(start, start + 36 * 3600_000, 99)
    ]
    assert all(moment.date() != date(2027, 7, 4) for moment in local)
    assert [m.date() for m in local][:1] == [date(2027, 7, 5)]


def test_every_kind_of_exclude_text_excludes_its_days(tmp_path: Path) -> None:
    ics = tmp_path / "closed.ics"
    ics.write_text(
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\n"
        "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20270310\r\nSUMMARY:one day\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20270420\r\nDTEND;VALUE=DATE:20270423\r\n"
        "SUMMARY:three days\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20200601\r\nRRULE:FREQ=YEARLY\r\n"
        "SUMMARY:every year\r\nEND:VEVENT\r\n"
        "BEGIN:VEVENT\r\nDTSTART:20270505T100000Z\r\nDTEND:20270505T110000Z\r\n"
        "SUMMARY:a meeting, not a whole day\r\nEND:VEVENT\r\n"
        "END:VCALENDAR\r\n"
    )
    calendar = parse_calendar(
        [
            "2027-02-02",
            "2027-12-24..2027-12-31",
            "*-08-15",
            "*-01-30..*-02-01",
            "wed",
            f"ical:{ics}",
        ]
    )

    excluded = {d for d in days_of(2027) if calendar.excluded(d.toordinal())}

    expected = {date(2027, 2, 2), date(2027, 8, 15), date(2027, 3, 10), date(2027, 6, 1)}
    expected |= {date(2027, 12, 24) + timedelta(days=n) for n in range(8)}
    expected |= {date(2027, 1, 30), date(2027, 1, 31), date(2027, 2, 1)}
    expected |= {date(2027, 4, 20), date(2027, 4, 21), date(2027, 4, 22)}
    expected |= {d for d in days_of(2027) if d.weekday() == 2}
    assert excluded == expected


@pytest.mark.parametrize(
    ("specs", "words"),
    [
        (["2027-13-01"], ["'2027-13-01'", "YYYY-MM-DD"]),
        (["2027-12-31..2027-12-01"], ["end comes before its start"]),
        (["*-02-30"], ["*-MM-DD"]),
        (["sat,sunday,funday"], ["'funday'", "weekday"]),
        (["mon-sun"], ["every weekday", "never fires"]),
        (["holidays:XX"], ["no country 'XX'", "holidays:US"]),
        (["holidays:DE-ZZ"], ["no subdivision 'ZZ'"]),
        (["ical:https://example.com/cal.ics"], ["only files"]),
        (["ical:/no/such/file.ics"], ["cannot read", "/no/such/file.ics"]),
        ([""], ["exclude entry ''", "2026-12-25"]),
    ],
)
def test_a_bad_exclude_text_is_one_error_naming_it(specs: list[str], words: list[str]) -> None:
    with pytest.raises(CalendarError) as caught:
        parse_calendar(specs)
    assert all(word in str(caught.value) for word in words), str(caught.value)


def test_a_calendar_that_leaves_no_slot_says_it_never_fires() -> None:
    slots = CalendarSlots(CronSlots(parse("0 9 * * sat")), parse_calendar("sat"), ZoneInfo("UTC"))
    with pytest.raises(NoFireTimeError, match="never fires"):
        slots.next_after(0)


def test_a_year_is_built_once_and_then_only_looked_up() -> None:
    calendar = parse_calendar(["holidays:US"])
    ordinal = date(2027, 7, 5).toordinal()
    assert calendar.excluded(ordinal)  # Independence Day observed on Monday 5 July 2027
    year = calendar._years[2027]
    for day in range(ordinal - 100, ordinal + 100):
        calendar.excluded(day)
    assert calendar._years[2027] is year and set(calendar._years) == {2027}


def test_without_the_holidays_package_the_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['holidays'] = None\n"
        "from celery_hashbeat.expr.calendar import parse_calendar\n"
        "try:\n    parse_calendar(['holidays:US'])\n"
        "except ValueError as exc:\n    print(exc)\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "celery-hashbeat[holidays]" in shown and "holidays:US" in shown
    assert len(shown.strip().splitlines()) == 1


def moved_by_hand(
    expression: str, tz: ZoneInfo, closed: set[date], step: int, year: int
) -> list[datetime]:
    """The oracle for a moved year: every plain slot (croniter-free: the expression's own
    ``next``, no calendar), each on a closed day put on the nearest open day in direction
    ``step`` at the same wall time, once each."""
    plain = CronSlots(parse(expression, key="k", tz=tz))
    found: set[datetime] = set()
    ms = to_ms(datetime(year - 1, 12, 1, tzinfo=tz))
    end = to_ms(datetime(year + 1, 2, 1, tzinfo=tz))
    while (ms := plain.next_after(ms)) < end:
        local = to_datetime(ms).astimezone(tz)
        day = local.date()
        while day in closed:
            day += timedelta(days=step)
        moved = datetime.combine(day, local.time(), tzinfo=tz).replace(fold=local.fold)
        found.add(to_datetime(to_ms(moved)).astimezone(tz))  # wall time made a real instant
    return sorted(moment for moment in found if moment.year == year)


@pytest.mark.parametrize("mode", ["next_business_day", "previous_business_day"])
@pytest.mark.parametrize(
    ("expression", "tz"),
    [
        ("H 9 * * *", NEW_YORK),
        ("H/20 H(8-17) * * *", MUNICH),
        ("30 2 * * *", MUNICH),  # in the spring gap once a year
        ("H H * * mon,wed", NEW_YORK),
    ],
)
def test_a_year_of_moved_slots_is_each_slot_put_on_its_nearest_open_day(
    expression: str, tz: ZoneInfo, mode: str
) -> None:
    oracle = holidays.country_holidays("US", years=range(2026, 2029))
    closed = {d for d in days_of(2026) + days_of(2027) + days_of(2028) if d.weekday() >= 5}
    closed |= set(oracle) | {date(2027, 3, 28), date(2027, 10, 31)}  # the change days in Munich
    specs = ["sat,sun", "holidays:US", "2027-03-28", "2027-10-31"]
    slots = CalendarSlots(
        CronSlots(parse(expression, key="k", tz=tz)), parse_calendar(specs), tz, mode
    )
    step = 1 if mode == "next_business_day" else -1

    assert year_of_slots(slots, 2027, tz) == moved_by_hand(expression, tz, closed, step, 2027)
