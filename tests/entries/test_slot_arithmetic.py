"""Slot arithmetic, checked against brute force: the next slot and the most recent ones, for
every kind of schedule. (The catch-up policy built on it is in tests/beat/test_catch_up.py.)"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from celery import Celery
from celery.schedules import BaseSchedule, crontab, schedule, solar
from hypothesis import given
from hypothesis import strategies as st
from redbeat.schedules import rrule

from celery_hashbeat import parse
from celery_hashbeat.entries.derived import DerivedSlots
from celery_hashbeat.entries.entry import ALL_CAP
from celery_hashbeat.entries.sharing import SharedSlots
from celery_hashbeat.expr.slots import (
    ChainSlots,
    CronSlots,
    IntervalSlots,
    Slots,
    to_datetime,
    to_ms,
)

UTC = timezone.utc
T0 = to_ms(datetime(2030, 1, 1, tzinfo=UTC))
MINUTE = 60_000
DAY = 24 * 60 * MINUTE


def brute(source: Slots, low: int, high: int) -> list[int]:
    """Every slot in (low, high], stepping one slot at a time."""
    found, slot = [], source.next_after(low)
    while slot <= high:
        found.append(slot)
        slot = source.next_after(slot)
    return found


@pytest.fixture(scope="module")
def app() -> Celery:
    return Celery("slots", set_as_current=False, config_source={"timezone": "Europe/Paris"})


sources = st.one_of(
    st.builds(
        lambda period, offset: IntervalSlots(period, offset % period),
        st.integers(1, 5000),
        st.integers(0, 10**6),
    ),
    st.builds(ChainSlots, st.integers(1, 5000)),
)


@given(sources, st.integers(-(10**6), 10**6), st.integers(0, 20_000), st.integers(1, 30))
def test_recent_is_the_tail_of_a_brute_force_walk(
    source: Slots, low: int, span: int, limit: int
) -> None:
    assert source.recent(low, low + span, limit) == brute(source, low, low + span)[-limit:]


@given(st.integers(1, 10**7), st.integers(0, 10**7), st.integers(-(10**9), 10**9))
def test_interval_slots_are_aligned_and_strictly_after(period: int, offset: int, ms: int) -> None:
    source = IntervalSlots(period, offset % period)
    following = source.next_after(ms)
    assert ms < following <= ms + period
    assert (following - offset % period) % period == 0


def test_cron_recent_steps_backwards() -> None:
    source = CronSlots(parse("*/7 * * * * *"))
    high = T0 + 10 * MINUTE + 123
    assert source.recent(T0, high, 5) == brute(source, T0, high)[-5:]
    assert source.recent(T0, high, 10_000) == brute(source, T0, high)
    assert source.recent(high, high, 3) == []


def test_derived_slots_are_a_pure_function_of_the_instant(app: Celery) -> None:
    source = DerivedSlots(crontab(minute="*/15", hour="9"), app)
    # 09:00 in Paris is 08:00 UTC in winter; whatever the real time, the answer is the same.
    assert source.next_after(T0) == T0 + 8 * 60 * MINUTE
    assert source.next_after(T0 + 8 * 60 * MINUTE) == T0 + (8 * 60 + 15) * MINUTE
    assert source.next_after(T0 + 8 * 60 * MINUTE + 1) == T0 + (8 * 60 + 15) * MINUTE
    # A relative schedule is rounded to its resolution (minutes here), as Celery rounds it.
    relative = DerivedSlots(schedule(timedelta(minutes=10), relative=True), app)
    assert relative.next_after(T0 + 3 * MINUTE + 5) == T0 + 13 * MINUTE


def test_a_long_forward_scan_re_anchors_near_the_present(app: Celery) -> None:
    source = DerivedSlots(crontab(), app)  # every minute
    high = T0 + 5000 * MINUTE
    assert source.recent(T0, high, 3) == [high - 2 * MINUTE, high - MINUTE, high]


def test_solar_slots(app: Celery) -> None:
    pytest.importorskip("ephem")
    source = DerivedSlots(solar("sunrise", 48.85, 2.35), app)
    sunrise = source.next_after(T0)
    assert T0 + 6 * 60 * MINUTE < sunrise < T0 + 8 * 60 * MINUTE  # ~07:44 UTC in Paris
    assert source.next_after(sunrise) - sunrise > 23 * 60 * MINUTE


@pytest.mark.parametrize(
    ("given", "days"),
    [
        (crontab(minute=0, hour=9, day_of_week="mon-fri"), 5 * 365),  # five years behind
        (crontab(minute="*/5", hour="9-17", day_of_week="mon-fri"), 30),  # business hours
        (crontab(minute=30, hour=4, day_of_month="1,15"), 5 * 365),
    ],
)
def test_a_long_backlog_of_an_irregular_schedule_still_gives_all_it_asks(
    app: Celery, given: crontab, days: int
) -> None:
    """catch_up="all" asks for the last 100 missed slots; weekends, nights and month ends in
    the backlog must not make it return fewer (it once gave 71 and 7)."""
    source = SharedSlots(app).source("backlog", given, relative=False)
    high = T0 + 2 * 24 * 60 * MINUTE + 17 * 60 * MINUTE  # a Thursday, 17:00 UTC
    low = high - days * 24 * 60 * MINUTE
    expected = brute(source, low, high)[-ALL_CAP:]
    assert len(expected) == ALL_CAP
    assert source.recent(low, high, ALL_CAP) == expected


@pytest.mark.parametrize(
    "given",
    [
        crontab(minute=0, hour=9, day_of_week="mon-fri"),
        crontab(minute="*/20", hour="1-3", day_of_month="1-7", day_of_week="sun"),
        crontab(minute="15,45", month_of_year="2,3,10,11"),
    ],
)
def test_a_crontab_gives_the_slots_celery_computes(given: crontab) -> None:
    """The engine stands in for Celery's own arithmetic: both give the same slots, here in Paris
    across a year, except across a DST change, where Celery before 5.7 was an hour off."""
    paris = Celery("paris", set_as_current=False, config_source={"timezone": "Europe/Paris"})
    ours = SharedSlots(paris).source("e", given, relative=False)
    celerys = DerivedSlots(given, paris)
    slot, compared = T0, 0
    for _ in range(300):
        following = ours.next_after(slot)
        offsets = {
            to_datetime(ms).astimezone(paris.timezone).utcoffset() for ms in (slot, following)
        }
        if len(offsets) == 1:
            assert following == celerys.next_after(slot), to_datetime(slot)
            compared += 1
        slot = following
    assert compared > 250


def test_solar_backlog_gives_all_it_asks(app: Celery) -> None:
    source = DerivedSlots(solar("sunrise", 56.95, 24.1), app)
    high = T0 + 400 * 24 * 60 * MINUTE
    assert source.recent(T0, high, ALL_CAP) == brute(source, T0, high)[-ALL_CAP:]


@pytest.mark.parametrize(
    ("day", "utc_hour"),
    [((2030, 1, 7), 6), ((2030, 7, 8), 5), ((2030, 3, 31), 5), ((2030, 10, 27), 6)],
)
def test_a_crontab_fires_in_the_apps_timezone(day: tuple[int, int, int], utc_hour: int) -> None:
    """07:00 in Berlin is 06:00 UTC in winter and 05:00 in summer, on the days of the DST
    changes too, on every supported Celery (before 5.7 Celery computed hours in the timezone of
    the datetime it was handed, and stepped across a DST change on the old offset)."""
    berlin = Celery("berlin", set_as_current=False, config_source={"timezone": "Europe/Berlin"})
    source = SharedSlots(berlin).source("morning", crontab(minute=0, hour=7), relative=False)
    midnight = to_ms(datetime(*day, tzinfo=UTC))
    assert source.next_after(midnight) == midnight + utc_hour * 60 * MINUTE


def test_a_redbeat_rrule_answers_instead_of_hanging(app: Celery) -> None:
    """Copying RedBeat's rrule through its pickling hooks walked its recurrence forever (the
    beat sat at 100% CPU); it is now read like any other schedule, and one that has run out
    says so."""
    every_5 = rrule("MINUTELY", interval=5, dtstart=datetime(2030, 1, 1, tzinfo=UTC))
    source = SharedSlots(app).source("rrule", every_5, relative=False)
    assert brute(source, T0 + 3 * MINUTE, T0 + 16 * MINUTE) == [
        T0 + 5 * MINUTE,
        T0 + 10 * MINUTE,
        T0 + 15 * MINUTE,
    ]
    twice = rrule("DAILY", count=2, dtstart=datetime(2030, 1, 1, 9, tzinfo=UTC))
    ended = SharedSlots(app).source("twice", twice, relative=False)
    assert ended.next_after(ended.next_after(T0)) == T0 + (24 + 9) * 60 * MINUTE
    with pytest.raises(ValueError, match="has no slot after"):
        ended.next_after(T0 + (24 + 9) * 60 * MINUTE)


class WeekdayMornings(BaseSchedule):
    """A custom schedule, written as users write them: 09:00 and 09:30 UTC, Monday to Friday."""

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        moment = last_run_at.astimezone(UTC).replace(second=0, microsecond=0)
        while True:
            moment += timedelta(minutes=30 - moment.minute % 30)
            if moment.weekday() < 5 and moment.hour == 9 and moment > last_run_at:
                return moment - self.now()


@pytest.mark.parametrize(
    ("given", "days"),
    [
        (crontab(minute=0, hour=9, day_of_week="mon-fri"), 5 * 365),
        (crontab(minute="*/5", hour="9-17", day_of_week="mon-fri"), 30),
        (crontab(minute=0, hour=9, day_of_month="1", month_of_year="1,7"), 60 * 365),
        (WeekdayMornings(), 3 * 365),
        (solar("sunset", 60.17, 24.94), 3 * 365),
    ],
    ids=["weekdays-5y", "business-hours-30d", "twice-a-year-60y", "custom-3y", "solar-3y"],
)
@pytest.mark.parametrize("limit", [1, 7, ALL_CAP])
def test_recent_through_celerys_own_api_is_the_tail_of_a_forward_walk(
    app: Celery, given: BaseSchedule, days: int, limit: int
) -> None:
    """Slots.recent for any schedule that only says its next slot (Celery's own crontab
    arithmetic, solar, a custom class), over backlogs long enough that the forward scan gives up
    and the search goes back from the present across nights, weekends and months."""
    if isinstance(given, solar):
        pytest.importorskip("ephem")
    source = DerivedSlots(given, app)
    for high in (T0 + 2 * DAY + 17 * 60 * MINUTE + 7, T0 + 5 * DAY + 3 * MINUTE):  # Thu, Sun
        low = high - days * DAY
        expected = brute(source, low, high)[-limit:]
        assert len(expected) == limit
        assert close(source.recent(low, high, limit), expected, given)
        # Just before the oldest: the whole window, nothing more (for solar, a minute before).
        before = expected[0] - (60_000 if isinstance(given, solar) else 1)
        assert close(source.recent(before, high, 10 * limit), expected, given)


def close(found: list[int], expected: list[int], given: BaseSchedule) -> bool:
    """Equal; for solar, within a second: ephem finds an event to a few dozen milliseconds,
    depending on where its search starts."""
    slack = 1000 if isinstance(given, solar) else 0
    return len(found) == len(expected) and all(
        abs(one - other) <= slack for one, other in zip(found, expected, strict=True)
    )
