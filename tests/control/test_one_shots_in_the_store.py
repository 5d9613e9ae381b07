"""One-shots kept in the store (docs/design.md §21): ``ScheduleAdmin.add(name, ..., at=...)``
checked on the build path, sent once by the running beats (an update or a failover does not send
it again), shown as done, and removed from the store after the documented retention.
In-process beats on the real Redis (store and broker) and a clock the test moves."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from celery import Celery

from celery_hashbeat import Scheduler, at
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.refusals import AdminError
from celery_hashbeat.entries.oneshot import DONE_RETENTION_MS
from celery_hashbeat.expr.slots import to_datetime
from tests.control.fixtures import read
from tests.support.beat_fixtures import START, Broker, Clock, Make, iso, run_for


def later(clock: Clock, seconds: float, *beats: Scheduler) -> None:
    clock.advance(seconds)
    read(*beats)


def when(ms: int) -> str:
    return to_datetime(ms).isoformat()


def test_a_stored_one_shot_is_sent_once_stays_done_and_leaves_after_the_retention(
    admin: ScheduleAdmin, app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    instant = START + 120_000
    app.conf.beat_schedule = {"config-once": {"task": "t", "schedule": at(when(instant))}}
    beat = schedulers(clock)
    read(beat)
    admin.add("once", task="shop.report", at=when(instant), args=[7])
    read(beat)
    later(clock, 60, beat)
    assert broker.slots() == []
    assert admin.get("once").state == f"to come, at {to_datetime(instant).isoformat()}"
    later(clock, 61, beat)
    assert sorted(broker.slots()) == [("config-once", iso(instant)), ("once", iso(instant))]

    admin.update("once", args=[8])  # a change after it ran does not run it again
    read(beat)
    later(clock, 3600, beat)
    assert len(broker.slots("once")) == 1
    assert (admin.get("once").state or "").startswith("done: sent its one slot")
    assert admin.get("once").next_slots == []

    later(clock, DONE_RETENTION_MS / 1000, beat)
    read(beat)
    assert admin.store.controls_of("once")[0] is None  # gone from the store
    assert broker.slots("once") == [("once", iso(instant))]
    assert broker.slots("config-once") == [("config-once", iso(instant))]


def test_a_standby_taking_over_does_not_send_a_stored_one_shot_again(
    admin: ScheduleAdmin, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    instant = START + 30_000
    first, second = schedulers(clock), schedulers(clock)
    read(first, second)
    admin.add("once", task="shop.report", at=when(instant), catch_up="all")
    read(first, second)
    later(clock, 31, first, second)
    assert broker.slots("once") == [("once", iso(instant))]
    first.close()
    clock.advance(300)
    run_for(second, 5, until=lambda: second.is_leader)
    read(second)
    assert second.is_leader and broker.slots("once") == [("once", iso(instant))]


def test_add_refuses_what_a_one_shot_cannot_be(admin: ScheduleAdmin, clock: Clock) -> None:
    past = when(START - 3_600_000)
    with pytest.raises(AdminError, match=r"'late'.*has passed.*catch_up"):
        admin.add("late", task="shop.report", at=past, catch_up="skip")
    with pytest.raises(AdminError, match=r"'late'.*has passed"):
        admin.add("late", task="shop.report", at=past, catch_up_window=60)
    with pytest.raises(AdminError, match=r"'naive'.*no time zone"):
        admin.add("naive", task="shop.report", at="2030-01-01T09:00:00")
    with pytest.raises(AdminError, match=r"'both'.*not both"):
        admin.add("both", task="shop.report", schedule=60, at=when(START + 60_000))
    with pytest.raises(AdminError, match=r"'cal'.*one instant"):
        admin.add("cal", task="shop.report", at=when(START + 60_000), exclude=["sat"])
    assert admin.store.changes(0).records == {}
    admin.add("late", task="shop.report", at=past)  # catch_up "latest" sends it late


def test_a_past_one_shot_allowed_by_catch_up_is_sent_once_as_soon_as_a_beat_leads(
    admin: ScheduleAdmin, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    past = START - 600_000
    admin.add("late", task="shop.report", at=datetime.fromtimestamp(past / 1000, timezone.utc))
    beat = schedulers(clock)
    read(beat)
    later(clock, 60, beat)
    assert broker.slots("late") == [("late", iso(past))]
