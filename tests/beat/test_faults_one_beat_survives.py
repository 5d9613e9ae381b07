"""The promises of docs/design.md §10 that one process shows: in-process schedulers against the real
Redis (store and broker) on a clock the tests move. The multi-process faults (signals, a broker
behind a fault proxy) are in tests/chaos."""

from __future__ import annotations

import logging
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest
import redis
from celery import Celery
from celery.beat import BeatLazyFunc
from redbeat.schedules import rrule

from celery_hashbeat import hashcron
from celery_hashbeat.store import open_store
from tests.support.beat_fixtures import START, Broker, Clock, Make, drain, iso, run_for, ticks


def test_a_message_that_can_never_be_sent_is_dropped_once_per_slot(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    app.conf.beat_schedule = {
        "unserialisable": {
            "task": "t",
            "schedule": hashcron("* * * * * *"),
            "kwargs": {"when": object()},  # JSON cannot carry it: the publish can never succeed
        },
        "fine": {"task": "t", "schedule": hashcron("* * * * * *")},
    }
    beat = schedulers(clock)
    ticks(beat)
    with caplog.at_level(logging.INFO, logger="celery_hashbeat"):
        for _ in range(3):
            clock.advance(1)
            drain(beat)
            ticks(beat, times=5)  # more ticks within the same second retry nothing
    dropped = [r for r in caplog.records if "can never be sent" in r.getMessage()]
    assert len(dropped) == 3, [r.getMessage() for r in dropped]
    assert all("unserialisable" in r.getMessage() for r in dropped)
    assert not any(r.exc_info for r in dropped)  # one line each, no traceback
    assert [entry for entry, _ in broker.slots()] == ["fine"] * 3
    # The dropped slots keep their claims: no other beat sends them later.
    store = open_store(app.conf.hashbeat_store_url, app.conf.hashbeat_key_prefix)
    assert store.last_slots(["unserialisable"]) == {"unserialisable": START + 3000}
    store.close()


def test_a_plain_interval_keeps_its_phase_across_leader_changes(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"every-30s": {"task": "t", "schedule": timedelta(seconds=30)}}
    beats = [schedulers(clock), schedulers(clock)]
    ticks(*beats)
    for second in range(1, 106):
        clock.advance(1)
        ticks(*beats, times=2)
        if second % 20 == 0:  # a rolling restart every 20 s, shorter than the interval
            leader = next(beat for beat in beats if beat.is_leader)
            leader.close()
            beats = [beat for beat in beats if beat is not leader] + [schedulers(clock)]
            run_for(beats[0], 2.0, until=lambda beat=beats[0]: beat.is_leader)
    sent = [slot for _, slot in broker.slots("every-30s")]
    assert sent == [iso(START + k * 30_000) for k in (1, 2, 3)]


def test_an_unreadable_fence_is_skipped_and_does_not_stop_the_beat(
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    redis_url: str,
    key_prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app.conf.beat_schedule = {
        name: {"task": "t", "schedule": hashcron("* * * * * *")} for name in ("hurt", "whole")
    }
    client = redis.Redis.from_url(redis_url)
    client.hset(f"{{{key_prefix}}}:fired", "hurt", "not a slot")
    client.close()
    beat = schedulers(clock)
    with caplog.at_level(logging.WARNING):
        ticks(beat)
        for _ in range(3):
            clock.advance(1)
            drain(beat)
    assert beat.is_leader
    assert Counter(entry for entry, _ in broker.slots()) == {"hurt": 3, "whole": 3}
    warnings = [r for r in caplog.records if "not a slot" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]


def test_a_broker_outage_keeps_an_intervals_phase_and_loses_nothing(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    """Slots given back while the broker is down are retried late; catching up must walk the
    interval's own chain from them, not shift it to the retry's moment."""
    attempts: list[int] = []

    def down_three_times() -> str:
        attempts.append(1)
        if len(attempts) <= 3:
            raise ConnectionRefusedError(111, "broker down")
        return "up"

    app.conf.hashbeat_catch_up = "all"
    app.conf.beat_schedule = {
        "plain-1s": {
            "task": "t",
            "schedule": timedelta(seconds=1),
            "kwargs": {"v": BeatLazyFunc(down_three_times)},
        }
    }
    beat = schedulers(clock)
    ticks(beat)
    for _ in range(8):
        clock.now += 1.0003  # a retry never lands exactly on a slot
        drain(beat)
    sent = [slot for _, slot in broker.slots("plain-1s")]
    assert sent == [iso(START + k * 1000) for k in range(1, 9)]


def test_a_standby_warns_once_when_the_leader_runs_another_schedule(
    app: Celery, clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    """Two apps on one store and prefix share one lease: only one of them ever runs."""
    app.conf.beat_schedule = {"mine": {"task": "t", "schedule": hashcron("* * * * *")}}
    other = Celery("other", set_as_current=False)
    other.conf.update({key: app.conf[key] for key in ("broker_url", "hashbeat_store_url")})
    other.conf.update(
        hashbeat_key_prefix=app.conf.hashbeat_key_prefix,
        hashbeat_lease_ttl=3,
        beat_schedule={"theirs": {"task": "t", "schedule": hashcron("*/5 * * * *")}},
    )
    leader = schedulers(clock)
    ticks(leader)
    assert leader.is_leader
    with caplog.at_level(logging.WARNING, logger="celery_hashbeat"):
        stranger, twin = schedulers(clock, target=other), schedulers(clock)
        for _ in range(3):
            run_for(stranger, 1.2)
            run_for(twin, 0.1)
    warned = [r.getMessage() for r in caplog.records if "different schedule" in r.getMessage()]
    assert len(warned) == 1 and leader.token in warned[0], warned


def test_a_batch_longer_than_the_lease_keeps_the_lease(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, redis_url: str, key_prefix: str
) -> None:
    """20 slots due at once, each 0.2 s to publish: 4 s, more than the 3 s lease. The leader
    renews inside the batch, so its lease never lapses and no standby takes over mid-batch."""

    def slow() -> str:
        time.sleep(0.2)
        return "ok"

    app.conf.beat_schedule = {
        f"slow-{i}": {
            "task": "t",
            "schedule": hashcron("0 * * * *"),
            "kwargs": {"v": BeatLazyFunc(slow)},
        }
        for i in range(20)
    }
    leader = schedulers(clock)
    ticks(leader)
    clock.advance(3600)
    started = time.monotonic()
    drain(leader)
    assert time.monotonic() - started > 3  # the batch did outlast one lease
    store = open_store(redis_url, key_prefix)
    lease = store.leader()
    store.close()
    assert leader.is_leader and lease is not None and lease.token == leader.token
    assert len(broker.slots()) == 20


def test_a_schedule_that_runs_out_is_given_up_with_one_line(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    start = datetime(2030, 1, 1, 0, 1, tzinfo=timezone.utc)
    app.conf.beat_schedule = {
        "twice": {"task": "t", "schedule": rrule("MINUTELY", count=2, dtstart=start)},
        "steady": {"task": "t", "schedule": hashcron("* * * * *")},
    }
    beat = schedulers(clock)
    ticks(beat)
    with caplog.at_level(logging.WARNING, logger="celery_hashbeat"):
        for _ in range(5):
            clock.advance(60)
            drain(beat)
    assert Counter(entry for entry, _ in broker.slots()) == {"twice": 2, "steady": 5}
    ended = [r for r in caplog.records if "twice" in r.getMessage()]
    assert len(ended) == 1 and "no more slots" in ended[0].getMessage(), ended
    assert not ended[0].exc_info
