"""Hand-checked calendar and DST cases: the readable half of the spec, with literal answers.

Every expected date below was worked out from a calendar (and re-checked against the oracle),
never taken from the engine. The 2024 facts they rest on: Jan 1 is a Monday, Feb has 29 days,
Jun 1 and Jun 15 are Saturdays, Jun 30 and Sep 15 are Sundays, Aug 31 and Nov 30 are Saturdays.
"""

from __future__ import annotations

import itertools
import time
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from celery_hashbeat.expr import NoFireTimeError, parse
from tests.expr import oracle


def fires(
    text: str, start: str, count: int, *, tz: str | None = None, day_and: bool = False
) -> list[str]:
    """The first ``count`` fires after ``start`` (ISO, read in tz), as ISO strings with offset."""
    zone = ZoneInfo(tz) if tz else timezone.utc
    after = datetime.fromisoformat(start).replace(tzinfo=zone)
    expr = parse(text, "calendar", tz=tz, day_and=day_and)
    return [d.isoformat() for d in itertools.islice(expr.iter(after), count)]


CASES: list[tuple[str, str, dict[str, object], list[str]]] = [
    # leap years: 2100 is not one
    (
        "0 0 29 2 *",
        "2024-03-01T00:00",
        {},
        ["2028-02-29T00:00:00+00:00", "2032-02-29T00:00:00+00:00"],
    ),
    ("0 0 29 2 *", "2096-03-01T00:00", {}, ["2104-02-29T00:00:00+00:00"]),
    (
        "0 0 L 2 *",
        "2023-01-01T00:00",
        {},
        [
            "2023-02-28T00:00:00+00:00",
            "2024-02-29T00:00:00+00:00",
            "2025-02-28T00:00:00+00:00",
        ],
    ),
    # the 31st skips short months
    (
        "0 0 31 * *",
        "2024-01-31T00:00",
        {},
        [
            "2024-03-31T00:00:00+00:00",
            "2024-05-31T00:00:00+00:00",
            "2024-07-31T00:00:00+00:00",
            "2024-08-31T00:00:00+00:00",
            "2024-10-31T00:00:00+00:00",
            "2024-12-31T00:00:00+00:00",
            "2025-01-31T00:00:00+00:00",
        ],
    ),
    ("0 0 30 * *", "2024-01-30T00:00", {}, ["2024-03-30T00:00:00+00:00"]),
    # month and year ends
    ("59 23 31 12 *", "2024-12-31T23:59", {}, ["2025-12-31T23:59:00+00:00"]),
    ("* * * * *", "2024-12-31T23:59:30", {}, ["2025-01-01T00:00:00+00:00"]),
    ("* * * * * *", "2024-12-31T23:59:59.500000", {}, ["2025-01-01T00:00:00+00:00"]),
    ("0 0 0 1 1 *", "2024-01-01T00:00", {}, ["2025-01-01T00:00:00+00:00"]),
    # L, LW
    (
        "0 0 L * *",
        "2024-01-15T00:00",
        {},
        [
            "2024-01-31T00:00:00+00:00",
            "2024-02-29T00:00:00+00:00",
            "2024-03-31T00:00:00+00:00",
            "2024-04-30T00:00:00+00:00",
        ],
    ),
    (
        "0 0 LW * *",
        "2024-01-01T00:00",
        {},
        [
            "2024-01-31T00:00:00+00:00",
            "2024-02-29T00:00:00+00:00",
            "2024-03-29T00:00:00+00:00",
            "2024-04-30T00:00:00+00:00",
            "2024-05-31T00:00:00+00:00",
            "2024-06-28T00:00:00+00:00",
            "2024-07-31T00:00:00+00:00",
            "2024-08-30T00:00:00+00:00",
            "2024-09-30T00:00:00+00:00",
            "2024-10-31T00:00:00+00:00",
            "2024-11-29T00:00:00+00:00",
            "2024-12-31T00:00:00+00:00",
        ],
    ),
    # nW: nearest weekday, never leaving the month
    (
        "0 0 15W * *",
        "2024-05-31T00:00",
        {},
        [
            "2024-06-14T00:00:00+00:00",
            "2024-07-15T00:00:00+00:00",
            "2024-08-15T00:00:00+00:00",
            "2024-09-16T00:00:00+00:00",
        ],
    ),
    (
        "0 0 1W * *",
        "2024-05-31T00:00",
        {},
        [
            "2024-06-03T00:00:00+00:00",
            "2024-07-01T00:00:00+00:00",
            "2024-08-01T00:00:00+00:00",
            "2024-09-02T00:00:00+00:00",
        ],
    ),
    # nL: last weekday n of the month
    (
        "0 0 * * 5L",
        "2024-01-01T00:00",
        {},
        [
            "2024-01-26T00:00:00+00:00",
            "2024-02-23T00:00:00+00:00",
            "2024-03-29T00:00:00+00:00",
            "2024-04-26T00:00:00+00:00",
            "2024-05-31T00:00:00+00:00",
        ],
    ),
    (
        "0 0 * * 7L",
        "2024-01-01T00:00",
        {},
        ["2024-01-28T00:00:00+00:00", "2024-02-25T00:00:00+00:00"],
    ),
    # n#k: months without a 5th Monday are skipped
    (
        "0 0 * * 1#5",
        "2024-01-01T00:00",
        {},
        [
            "2024-01-29T00:00:00+00:00",
            "2024-04-29T00:00:00+00:00",
            "2024-07-29T00:00:00+00:00",
            "2024-09-30T00:00:00+00:00",
            "2024-12-30T00:00:00+00:00",
        ],
    ),
    ("0 0 * * MON#1", "2024-01-01T00:00", {}, ["2024-02-05T00:00:00+00:00"]),
    ("0 0 * 2 1#5", "2017-01-01T00:00", {}, ["2044-02-29T00:00:00+00:00"]),
    # Vixie OR: the 1st, the 15th and every Monday
    (
        "0 0 1,15 * 1",
        "2023-12-31T00:00",
        {},
        [
            "2024-01-01T00:00:00+00:00",
            "2024-01-08T00:00:00+00:00",
            "2024-01-15T00:00:00+00:00",
            "2024-01-22T00:00:00+00:00",
            "2024-01-29T00:00:00+00:00",
            "2024-02-01T00:00:00+00:00",
            "2024-02-05T00:00:00+00:00",
            "2024-02-12T00:00:00+00:00",
            "2024-02-15T00:00:00+00:00",
        ],
    ),
    # ... and day_and=True: only Mondays that are the 1st or the 15th
    (
        "0 0 1,15 * 1",
        "2023-12-31T00:00",
        {"day_and": True},
        [
            "2024-01-01T00:00:00+00:00",
            "2024-01-15T00:00:00+00:00",
            "2024-04-01T00:00:00+00:00",
            "2024-04-15T00:00:00+00:00",
            "2024-07-01T00:00:00+00:00",
            "2024-07-15T00:00:00+00:00",
        ],
    ),
    ("0 0 29 2 1", "2017-01-01T00:00", {"day_and": True}, ["2044-02-29T00:00:00+00:00"]),
    # a field starting with '*' (or '?') makes it AND
    (
        "0 0 */2 * 1",
        "2024-01-01T00:00",
        {},
        [
            "2024-01-15T00:00:00+00:00",
            "2024-01-29T00:00:00+00:00",
            "2024-02-05T00:00:00+00:00",
        ],
    ),
    ("0 0 ? * MON", "2024-01-01T00:00", {}, ["2024-01-08T00:00:00+00:00"]),
    (
        "0 0 1 * MON",
        "2024-01-01T00:00",
        {},
        [
            "2024-01-08T00:00:00+00:00",
            "2024-01-15T00:00:00+00:00",
            "2024-01-22T00:00:00+00:00",
            "2024-01-29T00:00:00+00:00",
            "2024-02-01T00:00:00+00:00",
        ],
    ),
    (
        "0 0 L * 5",
        "2024-01-25T00:00",
        {},
        [
            "2024-01-26T00:00:00+00:00",
            "2024-01-31T00:00:00+00:00",
            "2024-02-02T00:00:00+00:00",
        ],
    ),
    # Sunday is 0 and 7; N/n runs to the field's end (7 = Sunday again)
    ("0 0 * * 7", "2024-01-01T00:00", {}, ["2024-01-07T00:00:00+00:00"]),
    (
        "0 12 * * 1/2",
        "2024-01-01T00:00",
        {},
        [
            "2024-01-01T12:00:00+00:00",
            "2024-01-03T12:00:00+00:00",
            "2024-01-05T12:00:00+00:00",
            "2024-01-07T12:00:00+00:00",
            "2024-01-08T12:00:00+00:00",
        ],
    ),
    (
        "59/15 * * * *",
        "2024-01-01T00:00",
        {},
        ["2024-01-01T00:59:00+00:00", "2024-01-01T01:59:00+00:00"],
    ),
    # New York, spring forward 2024-03-10 02:00 EST -> 03:00 EDT
    (
        "30 2 * * *",
        "2024-03-09T12:00",
        {"tz": "America/New_York"},
        [
            "2024-03-10T03:00:00-04:00",
            "2024-03-11T02:30:00-04:00",
        ],
    ),
    (
        "0,30 2 * * *",
        "2024-03-09T12:00",
        {"tz": "America/New_York"},
        [
            "2024-03-10T03:00:00-04:00",
            "2024-03-11T02:00:00-04:00",
        ],
    ),
    (
        "0,30 2,3 * * *",
        "2024-03-09T12:00",
        {"tz": "America/New_York"},
        [
            "2024-03-10T03:00:00-04:00",
            "2024-03-10T03:30:00-04:00",
            "2024-03-11T02:00:00-04:00",
        ],
    ),
    (
        "*/30 2 * * *",
        "2024-03-09T12:00",
        {"tz": "America/New_York"},
        [
            "2024-03-11T02:00:00-04:00",
            "2024-03-11T02:30:00-04:00",
        ],
    ),
    ("0 30 2 * * *", "2024-03-09T12:00", {"tz": "America/New_York"}, ["2024-03-11T02:30:00-04:00"]),
    # New York, fall back 2024-11-03 02:00 EDT -> 01:00 EST
    (
        "30 1 * * *",
        "2024-11-02T12:00",
        {"tz": "America/New_York"},
        [
            "2024-11-03T01:30:00-04:00",
            "2024-11-04T01:30:00-05:00",
        ],
    ),
    (
        "*/30 1 * * *",
        "2024-11-02T12:00",
        {"tz": "America/New_York"},
        [
            "2024-11-03T01:00:00-04:00",
            "2024-11-03T01:30:00-04:00",
            "2024-11-03T01:00:00-05:00",
            "2024-11-03T01:30:00-05:00",
            "2024-11-04T01:00:00-05:00",
        ],
    ),
    (
        "0 * * * *",
        "2024-11-02T23:30",
        {"tz": "America/New_York"},
        [
            "2024-11-03T00:00:00-04:00",
            "2024-11-03T01:00:00-04:00",
            "2024-11-03T01:00:00-05:00",
            "2024-11-03T02:00:00-05:00",
        ],
    ),
    (
        "0 30 1 * * *",
        "2024-11-02T12:00",
        {"tz": "America/New_York"},
        [
            "2024-11-03T01:30:00-04:00",
            "2024-11-03T01:30:00-05:00",
        ],
    ),
    # Riga: 2024-03-31 03:00 -> 04:00, 2024-10-27 04:00 -> 03:00
    (
        "30 3 * * *",
        "2024-03-30T12:00",
        {"tz": "Europe/Riga"},
        [
            "2024-03-31T04:00:00+03:00",
            "2024-04-01T03:30:00+03:00",
        ],
    ),
    (
        "30 3 * * *",
        "2024-10-26T12:00",
        {"tz": "Europe/Riga"},
        [
            "2024-10-27T03:30:00+03:00",
            "2024-10-28T03:30:00+02:00",
        ],
    ),
    # Lord Howe, half-hour shifts: 2024-04-07 02:00 (+11) -> 01:30 (+10:30),
    # 2024-10-06 02:00 (+10:30) -> 02:30 (+11)
    (
        "45 1 * * *",
        "2024-04-06T12:00",
        {"tz": "Australia/Lord_Howe"},
        [
            "2024-04-07T01:45:00+11:00",
            "2024-04-08T01:45:00+10:30",
        ],
    ),
    (
        "*/20 1 * * *",
        "2024-04-06T12:00",
        {"tz": "Australia/Lord_Howe"},
        [
            "2024-04-07T01:00:00+11:00",
            "2024-04-07T01:20:00+11:00",
            "2024-04-07T01:40:00+11:00",
            "2024-04-07T01:40:00+10:30",
            "2024-04-08T01:00:00+10:30",
        ],
    ),
    (
        "* 2 * * *",
        "2024-04-07T01:58",
        {"tz": "Australia/Lord_Howe"},
        [
            "2024-04-07T02:00:00+10:30",
            "2024-04-07T02:01:00+10:30",
        ],
    ),
    (
        "15 2 * * *",
        "2024-10-05T12:00",
        {"tz": "Australia/Lord_Howe"},
        [
            "2024-10-06T02:30:00+11:00",
            "2024-10-07T02:15:00+11:00",
        ],
    ),
    (
        "*/15 2 * * *",
        "2024-10-05T12:00",
        {"tz": "Australia/Lord_Howe"},
        [
            "2024-10-06T02:30:00+11:00",
            "2024-10-06T02:45:00+11:00",
            "2024-10-07T02:00:00+11:00",
        ],
    ),
]


def _case_id(case: tuple[str, str, dict[str, object], list[str]]) -> str:
    text, start, options, _ = case
    extra = "".join(f" {k}={v}" for k, v in options.items())
    return f"{text} after {start}{extra}"


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_calendar_case(case: tuple[str, str, dict[str, object], list[str]]) -> None:
    """The engine's fires are the hand-computed ones."""
    text, start, options, expected = case
    assert fires(text, start, len(expected), **options) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_calendar_case_matches_the_oracle(
    case: tuple[str, str, dict[str, object], list[str]],
) -> None:
    """Keeps this table honest: the oracle (no engine involved) agrees with every literal."""
    text, start, options, expected = case
    tz_name = options.get("tz")
    tz = oracle.zone(tz_name if isinstance(tz_name, str) else None)
    spec = oracle.parse(text, "calendar", day_and=bool(options.get("day_and", False)))
    first = datetime.fromisoformat(start).replace(tzinfo=tz).timestamp()
    last = datetime.fromisoformat(expected[-1]).timestamp()
    got = list(oracle.iter_next(spec, tz, first, int(last - first) + 1))
    assert [datetime.fromtimestamp(t, tz).isoformat() for t in got] == expected


@pytest.mark.parametrize(
    ("text", "day", "want"),
    [
        ("0 0 30W * *", "2024-06-28", True),  # 30th is a Sunday and the last day: Friday 28th
        ("0 0 30W * *", "2024-06-30", False),
        ("0 0 30W * *", "2024-07-01", False),  # never into the next month
        ("0 0 30W * *", "2024-11-29", True),  # 30th is a Saturday: Friday 29th
        ("0 0 31W * *", "2024-03-29", True),  # 31st is a Sunday and the last day
        ("0 0 31W * *", "2024-04-01", False),
        ("0 0 31W * *", "2024-08-30", True),  # 31st is a Saturday
        ("0 0 1W * *", "2024-06-03", True),  # 1st is a Saturday: Monday 3rd, not May 31
        ("0 0 1W * *", "2024-05-31", False),
        ("0 0 LW * *", "2024-03-29", True),
        ("0 0 LW * *", "2024-03-31", False),
        ("0 0 * * 1#5", "2024-02-26", False),  # February 2024 has four Mondays
        ("0 0 * * 4#5", "2024-02-29", True),  # ... and five Thursdays
    ],
)
def test_day_specials_on_chosen_days(text: str, day: str, want: bool) -> None:
    """matches() on the days where nW, LW and n#k are easiest to get wrong."""
    expr = parse(text)
    midnight = datetime.fromisoformat(day).replace(tzinfo=timezone.utc)
    assert expr.matches(midnight) is want


def test_prev_follows_the_dst_rule() -> None:
    """prev() sees the same fires as next(): once after a gap, first occurrence of a repeat."""
    ny = ZoneInfo("America/New_York")
    spring = parse("30 2 * * *", tz="America/New_York")
    assert spring.prev(datetime(2024, 3, 10, 12, tzinfo=ny)).isoformat() == (
        "2024-03-10T03:00:00-04:00"
    )
    fall = parse("30 1 * * *", tz="America/New_York")
    assert fall.prev(datetime(2024, 11, 3, 12, tzinfo=ny)).isoformat() == (
        "2024-11-03T01:30:00-04:00"
    )
    hourly = parse("0 * * * *", tz="America/New_York")
    assert hourly.prev(datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=ny)).isoformat() == (
        "2024-11-03T01:00:00-05:00"
    )


def test_no_fire_after_year_9999() -> None:
    """§4: next() past the calendar's end raises NoFireTimeError, promptly."""
    expr = parse("0 0 1 1 *")
    with pytest.raises(NoFireTimeError):
        expr.next(datetime(9999, 6, 1, tzinfo=timezone.utc))
    last = parse("59 23 31 12 *")
    end = last.next(datetime(9999, 12, 31, 23, 58, tzinfo=timezone.utc))
    assert end.isoformat() == "9999-12-31T23:59:00+00:00"
    with pytest.raises(NoFireTimeError):
        last.next(end)
    with pytest.raises(NoFireTimeError):
        parse("0 0 29 2 *").next(datetime(9996, 3, 1, tzinfo=timezone.utc))


def test_calendar_edges_still_fire() -> None:
    """The last day of year 9999 and the first of year 1 are days like any other."""
    every_minute = parse("* * * * *")
    after = datetime(9999, 12, 30, 23, 59, tzinfo=timezone.utc)
    assert every_minute.next(after).isoformat() == "9999-12-31T00:00:00+00:00"
    new_year = parse("0 0 1 1 *")
    before = datetime(1, 1, 2, tzinfo=timezone.utc)
    assert new_year.prev(before).isoformat() == "0001-01-01T00:00:00+00:00"


def test_no_fire_before_year_1() -> None:
    """prev() before the calendar's start raises NoFireTimeError too."""
    with pytest.raises(NoFireTimeError):
        parse("0 0 2 1 *").prev(datetime(1, 1, 1, 12, tzinfo=timezone.utc))


@pytest.mark.parametrize(
    ("text", "day_and"),
    [
        ("0 0 29 2 1", True),  # Feb 29 on a Monday: 28 years apart at worst
        ("59 59 23 29 2 0", True),
        ("0 0 * 2 1#5", False),
        ("0 0 31 12 5#5", True),
        ("0 0 L 2 1L", True),
        ("0 0 29 2 *", False),
    ],
)
@pytest.mark.parametrize("year", [1999, 2088, 2096, 2100])
def test_sparse_expressions_are_found_quickly(text: str, day_and: bool, year: int) -> None:
    """The sparsest schedules: same answer as the oracle, found in bounded time."""
    start = datetime(year, 3, 1, 12, tzinfo=timezone.utc)
    expr = parse(text, day_and=day_and)
    began = time.perf_counter()
    got = expr.next(start).timestamp()
    back = expr.prev(start).timestamp()
    assert time.perf_counter() - began < 2.0
    spec = oracle.parse(text, day_and=day_and)
    tz = timezone.utc
    horizon = 60 * 366 * 86400
    assert got == oracle.next_fire(spec, tz, start.timestamp(), horizon)
    assert back == oracle.prev_fire(spec, tz, start.timestamp(), horizon)


def test_iter_stops_at_the_end_of_the_calendar() -> None:
    """iter() ends quietly after the last fire of year 9999."""
    fires = list(parse("59 23 31 12 *").iter(datetime(9997, 6, 1, tzinfo=timezone.utc)))
    assert [f.isoformat() for f in fires] == [
        "9997-12-31T23:59:00+00:00",
        "9998-12-31T23:59:00+00:00",
        "9999-12-31T23:59:00+00:00",
    ]


def test_naive_fold_picks_the_occurrence() -> None:
    """A naive wall time is read in the zone with its fold (PEP 495): 01:30 fold=1 is EST."""
    expr = parse("*/10 * * * *", tz="America/New_York")
    ny = ZoneInfo("America/New_York")
    for fold, offset in ((0, "-04:00"), (1, "-05:00")):
        got = expr.next(datetime(2024, 11, 3, 1, 30, fold=fold))
        if got.tzinfo is None:
            got = got.replace(tzinfo=ny)
        assert got.isoformat() == f"2024-11-03T01:40:00{offset}"
