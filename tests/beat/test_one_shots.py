"""One-shot entries (docs/design.md §21) in running beats: in-process schedulers on the real Redis
(store and broker) and a clock the test moves. A one-shot is sent once at its instant, by
whichever beat leads, and never again: not after a restart, a re-read configuration or a
take-over; a beat that was down at the instant sends it late by the catch-up rules."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from celery import Celery

from celery_hashbeat import at
from celery_hashbeat.expr.slots import to_datetime
from celery_hashbeat.publish.message import slot_task_id
from tests.support.beat_fixtures import START, Broker, Clock, Make, drain, iso, run_for

MINUTE_MS = 60_000


def instant(ms: int) -> str:
    return to_datetime(ms).isoformat()


def test_a_one_shot_is_sent_once_at_its_instant_and_never_after_a_restart(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    when = START + 90_000
    app.conf.beat_schedule = {"once": {"task": "t", "schedule": at(instant(when))}}
    beat = schedulers(clock)
    drain(beat)
    clock.advance(60)
    drain(beat)
    assert broker.slots("once") == []
    clock.advance(31)
    drain(beat)
    assert broker.slots("once") == [("once", iso(when))]
    assert broker.headers()[0]["id"] == slot_task_id("once", when)
    clock.advance(3600)
    drain(beat)
    beat.setup_schedule()  # the configuration read again
    drain(beat)
    beat.close()

    clock.advance(60)
    again = schedulers(clock)  # a restart, with catch_up "latest"
    drain(again)
    clock.advance(86400)
    drain(again)
    assert broker.slots("once") == [("once", iso(when))]


@pytest.mark.parametrize(
    ("extra", "sent"),
    [
        ({}, True),
        ({"catch_up": "all"}, True),
        ({"catch_up": "skip"}, False),
        ({"catch_up_window": 60}, False),
        ({"catch_up_window": 3600}, True),
    ],
)
def test_a_one_shot_missed_while_no_beat_ran_follows_the_catch_up_rules(
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    extra: dict[str, object],
    sent: bool,
) -> None:
    when = START + 5 * MINUTE_MS
    app.conf.beat_schedule = {"once": {"task": "t", "schedule": at(instant(when)), **extra}}
    first = schedulers(clock)
    drain(first)
    first.close()
    clock.advance(10 * 60)  # the beats were down at the instant
    second = schedulers(clock)
    drain(second)
    clock.advance(3600)
    drain(second)
    assert broker.slots("once") == ([("once", iso(when))] if sent else [])


def test_a_standby_taking_over_after_the_one_shot_does_not_send_it_again(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    when = START + 30_000
    app.conf.beat_schedule = {
        "once": {"task": "t", "schedule": at(instant(when)), "catch_up": "all"}
    }
    first, second = schedulers(clock), schedulers(clock)
    drain(first)
    drain(second)
    clock.advance(31)
    drain(first)
    assert broker.slots("once") == [("once", iso(when))]
    first.close()
    clock.advance(600)
    run_for(second, 5, until=lambda: second.is_leader)
    drain(second)
    assert second.is_leader
    assert broker.slots("once") == [("once", iso(when))]


def test_a_one_shot_needs_a_zone() -> None:
    with pytest.raises(ValueError, match="no time zone: give it one"):
        at("2030-01-01T09:00:00")
    with pytest.raises(ValueError, match="no time zone"):
        at(datetime(2030, 1, 1, 9))
    assert at(datetime(2030, 1, 1, 9, tzinfo=timezone.utc)) == at("2030-01-01T10:00:00+01:00")
