"""Exclusion calendars in running beats (docs/design.md §20): in-process schedulers on the real
Redis (store and broker) and a clock the test moves. A slot on an excluded day is not sent; a
moved slot is sent once, on the open day, with the task id of the instant it is sent at, by
whichever beat leads. T0 is 2030-01-01T00:00Z, a Tuesday."""

from __future__ import annotations

from celery import Celery

from celery_hashbeat import hashcron, hashinterval
from celery_hashbeat.publish.message import slot_task_id
from tests.support.beat_fixtures import START, Broker, Clock, Make, drain, iso, run_for

HOUR_MS = 3600_000
DAY_MS = 24 * HOUR_MS


def walk(clock: Clock, beat: object, hours: int) -> None:
    """Move the clock an hour at a time, ticking the beat to rest after each step."""
    for _ in range(hours):
        clock.advance(3600)
        drain(beat)  # type: ignore[arg-type]


def test_no_slot_is_sent_on_an_excluded_day(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {
        "hourly": {"task": "t", "schedule": hashcron("0 * * * *"), "exclude": ["2030-01-02"]},
        "interval": {"task": "t", "schedule": hashinterval(3600, exclude="wed")},
        "plain": {"task": "t", "schedule": 3600.0, "exclude": ["*-01-02"]},
    }
    beat = schedulers(clock)
    drain(beat)
    walk(clock, beat, 71)  # to 2030-01-03T23:00

    for name in ("hourly", "interval", "plain"):
        days = {slot[:10] for _, slot in broker.slots(name)}
        assert days == {"2030-01-01", "2030-01-03"}, (name, days)
    assert len(broker.slots("hourly")) == 47  # 01:00..23:00 on the 1st, every hour on the 3rd


def test_a_moved_slot_is_sent_once_on_the_next_open_day_at_its_time(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    # Wednesdays at 12:00; 2030-01-02 (a Wednesday) is excluded: that run moves to Thursday.
    app.conf.beat_schedule = {
        "weekly": {
            "task": "t",
            "schedule": hashcron(
                "0 12 * * wed", exclude=["2030-01-02"], on_excluded="next_business_day"
            ),
        },
        "daily": {
            "task": "t",
            "schedule": hashcron("0 12 * * *"),
            "exclude": ["2030-01-02"],
            "on_excluded": "next_business_day",
        },
    }
    beat = schedulers(clock)
    drain(beat)
    walk(clock, beat, 24 * 9)

    moved = START + 2 * DAY_MS + 12 * HOUR_MS
    assert broker.slots("weekly") == [("weekly", iso(moved)), ("weekly", iso(moved + 6 * DAY_MS))]
    sent = [h for h in broker.headers() if h["hashbeat_entry"] == "weekly"]
    assert sent[0]["id"] == slot_task_id("weekly", moved)
    # The daily slot of the 2nd lands on the 3rd's own 12:00: one message, not two.
    daily = [slot for _, slot in broker.slots("daily")]
    assert len(daily) == len(set(daily)) == 8 and iso(START + DAY_MS + 12 * HOUR_MS) not in daily


def test_a_standby_that_takes_over_sends_the_moved_slot_once(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    # Tuesdays and Wednesdays at 12:00; Wednesday 2030-01-02 is excluded, its run moves to
    # Thursday. The leader sends Tuesday's, then stops; the standby leads after Thursday 12:00
    # and catches the moved slot up (catch_up "latest"), once.
    app.conf.beat_schedule = {
        "twice": {
            "task": "t",
            "schedule": hashcron("0 12 * * tue,wed"),
            "exclude": ["2030-01-02"],
            "on_excluded": "next_business_day",
        }
    }
    first, second = schedulers(clock), schedulers(clock)
    drain(first)
    drain(second)
    assert first.is_leader and not second.is_leader
    walk(clock, first, 37)  # to 2030-01-02T13:00: Tuesday's sent, Wednesday's moved
    assert broker.slots("twice") == [("twice", iso(START + 12 * HOUR_MS))]
    first.close()  # the leader stops; the standby leads from here
    clock.advance(DAY_MS / 1000)  # past Thursday 12:00, with no beat ticking
    run_for(second, 5, until=lambda: second.is_leader)
    drain(second)
    moved = START + 2 * DAY_MS + 12 * HOUR_MS
    assert second.is_leader
    assert broker.slots("twice")[1:] == [("twice", iso(moved))]
    walk(clock, second, 24)
    assert broker.slots("twice")[1:] == [("twice", iso(moved))]
