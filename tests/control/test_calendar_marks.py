"""What ``ScheduleAdmin.get`` says an entry's calendar did to its next slots (docs/design.md
§20): each slot that slots of excluded days were moved onto, with those slots, and the slots it
left out, on the real Redis store and the tests' clock. The oracle is date arithmetic."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone

from celery_hashbeat import hashcron
from celery_hashbeat.control.admin import ScheduleAdmin
from tests.support.beat_fixtures import Clock


def ms(day: date, at: time = time(9)) -> int:
    return int(datetime.combine(day, at, tzinfo=timezone.utc).timestamp() * 1000)


def test_the_slots_of_an_excluded_run_of_days_all_land_on_the_next_open_day(
    admin: ScheduleAdmin, clock: Clock
) -> None:
    today = datetime.fromtimestamp(clock(), timezone.utc).date()
    closed = [today + timedelta(days=n) for n in range(3, 7)]
    span = f"{closed[0]}..{closed[-1]}"
    daily = hashcron("0 9 * * *", exclude=[span], on_excluded="next_business_day")
    admin.add("daily", "shop.report", daily)
    view = admin.get("daily")
    reopened = ms(closed[-1] + timedelta(days=1))
    assert reopened in view.next_slots
    assert view.moved_from == {reopened: [ms(day) for day in closed]}
    assert not any(ms(day) in view.next_slots for day in closed)
    assert (view.fates.left_out_count, view.fates.moved_count) == (0, 4)


def test_previous_business_day_marks_the_day_before_and_skip_lists_what_it_left_out(
    admin: ScheduleAdmin, clock: Clock
) -> None:
    today = datetime.fromtimestamp(clock(), timezone.utc).date()
    closed = today + timedelta(days=4)
    backwards = hashcron("0 9 * * *", exclude=[str(closed)], on_excluded="previous_business_day")
    admin.add("backwards", "shop.report", backwards)
    view = admin.get("backwards")
    eve = ms(closed - timedelta(days=1))
    assert view.moved_from == {eve: [ms(closed)]}
    admin.add("skipping", "shop.report", hashcron("0 9 * * *", exclude=[str(closed)]))
    skipping = admin.get("skipping")
    assert skipping.moved_from == {} and skipping.fates.left_out == [ms(closed)]
    # A listing of every entry does not walk the calendars (named entries only).
    listed = {view.name: view for view in admin.list()}
    assert listed["skipping"].fates.left_out_count == 0
    assert listed["backwards"].moved_from == {eve: [ms(closed)]}
