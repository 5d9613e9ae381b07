"""The Scheduler against the real Redis (store and broker) on a clock the tests move."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from celery import Celery
from celery.beat import BeatLazyFunc
from celery.schedules import crontab

from celery_hashbeat import hashcron, hashinterval
from celery_hashbeat.beat.instants import LEAD_MS
from celery_hashbeat.control.polling import POLL_S
from celery_hashbeat.publish.message import NAMESPACE, slot_task_id
from celery_hashbeat.store import open_store
from tests.support.beat_fixtures import (
    MINUTE,
    START,
    T0,
    Broker,
    Clock,
    Make,
    drain,
    iso,
    run_for,
    ticks,
)


def test_task_ids_and_headers(app: Celery, broker: Broker, clock: Clock, schedulers: Make) -> None:
    app.conf.beat_schedule = {
        "every-minute": {
            "task": "shop.refresh",
            "schedule": hashcron("* * * * *"),
            "args": (1, 2),
            "options": {"headers": {"mine": "kept"}, "expires": 30},
        }
    }
    beat = schedulers(clock)
    ticks(beat)
    assert beat.is_leader and broker.new() == []  # a new entry never fires on start
    clock.advance(60)
    drain(beat)
    [headers] = broker.new()
    assert headers["hashbeat_entry"] == "every-minute"
    assert headers["hashbeat_slot"] == "2030-01-01T00:01:00.000+00:00"
    assert headers["id"] == str(uuid.uuid5(NAMESPACE, f"every-minute|{START + MINUTE}"))
    assert headers["id"] == slot_task_id("every-minute", START + MINUTE)
    assert headers["task"] == "shop.refresh" and headers["mine"] == "kept"
    assert headers["argsrepr"] == "[1, 2]" and headers["expires"] is not None


def test_every_kind_of_entry_runs(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    @app.task(name="shop.ping")
    def ping(n: int = 0) -> int:
        return n

    app.conf.beat_schedule = {
        "cron": {"task": "t.cron", "schedule": crontab(minute="*/2")},
        "seconds": {"task": "t.seconds", "schedule": 30},
        "delta": {"task": "t.delta", "schedule": timedelta(minutes=1)},
        "relative": {"task": "t.relative", "schedule": 60, "relative": True},
        "hashed": {"task": "t.hashed", "schedule": hashcron("H/2 * * * *")},
        "interval": {"task": "t.interval", "schedule": hashinterval(45)},
        "lazy": {"task": "t.lazy", "schedule": 60, "kwargs": {"n": BeatLazyFunc(lambda: 41)}},
    }
    beat = schedulers(clock)
    beat.tick()  # leads from T0: every entry waits for its first slot after T0
    app.add_periodic_task(120.0, ping.s(5), name="periodic")
    beat.setup_schedule()  # the configuration is (re)loaded
    for _ in range(8):
        clock.advance(15)
        drain(beat)
    end = START + 120_000
    interval, slot = 0, hashinterval(45).bound("interval").next_slot(START)
    while slot <= end:
        interval, slot = interval + 1, slot + 45_000
    assert Counter(entry for entry, _ in broker.slots()) == {
        "cron": 1,
        "seconds": 4,
        "delta": 2,
        "relative": 2,
        "hashed": 1,
        "interval": interval,
        "lazy": 2,
        "periodic": 1,
    }
    lazy = [h for h in broker.headers() if h["hashbeat_entry"] == "lazy"]
    assert lazy[0]["kwargsrepr"] == "{'n': 41}"


def test_two_beats_never_both_publish_a_slot(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {
        f"e{i}": {"task": "t", "schedule": hashcron("H/5 * * * * *")} for i in range(20)
    }
    beats = [schedulers(clock), schedulers(clock)]
    ticks(*beats)  # one leads from T0
    for step in range(120):
        clock.advance(1)
        ticks(*beats, times=2)
        if step % 30 == 29:  # hand over: the leader stops cleanly, a new beat joins
            leader = next(beat for beat in beats if beat.is_leader)
            leader.close()
            beats = [beat for beat in beats if beat is not leader] + [schedulers(clock)]
            run_for(beats[0], 2.0, until=lambda beat=beats[0]: beat.is_leader)
    ids = [headers["id"] for headers in broker.headers()]
    assert len(ids) == len(set(ids))
    fired = Counter(entry for entry, _ in broker.slots())
    # Every entry fires every 5 s and latest catch-up loses nothing across a clean handover.
    assert set(fired.values()) == {24}, fired


def test_a_frozen_leader_that_wakes_up_is_fenced(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, redis_url: str, key_prefix: str
) -> None:
    app.conf.beat_schedule = {"e": {"task": "t", "schedule": hashcron("* * * * * *")}}
    stale, fresh = schedulers(clock), schedulers(clock)
    ticks(stale)
    assert stale.is_leader
    # The leader freezes; its lease lapses and another beat takes over.
    store = open_store(redis_url, key_prefix)
    store.release(stale.token)
    store.close()
    ticks(fresh)
    assert fresh.is_leader
    clock.advance(5)
    drain(fresh)
    assert len(broker.new()) == 1
    # Waking between its lease check and its claim, the old leader still believes it leads.
    stale.dispatcher.dispatch(stale.now_ms())
    assert broker.new() == []
    assert not stale.is_leader  # the rejected claim made it check its lease, and step down


def test_a_failed_publish_gives_its_claim_back(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    attempts = []

    def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionRefusedError(111, "broker refused the connection")
        return "ok"

    app.conf.beat_schedule = {
        "flaky": {
            "task": "t",
            "schedule": hashcron("0 * * * *"),
            "kwargs": {"v": BeatLazyFunc(flaky)},
        }
    }
    beat = schedulers(clock)
    ticks(beat)
    clock.advance(3600)
    drain(beat)
    assert broker.new() == [] and len(attempts) == 1
    clock.advance(1)
    drain(beat)
    [headers] = broker.new()
    assert headers["hashbeat_slot"] == iso(START + 3_600_000) and len(attempts) == 2


def test_malformed_entries_are_skipped_and_named(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    app.conf.beat_schedule = {
        "bad-expression": {"task": "t", "schedule": hashcron("61 * * * *")},
        "bad-key": {"task": "t", "schedule": hashcron("H * * * *", key=1.5)},  # type: ignore[arg-type]
        "bad-type": {"task": "t", "schedule": "every day"},
        "bad-catch-up": {"task": "t", "schedule": 60, "catch_up": "sometimes"},
        "bad-keys": {"task": "t", "schedule": 60, "kwarg": {}},
        "no-task": {"schedule": 60},
        "good": {"task": "t", "schedule": 60},
    }
    with caplog.at_level(logging.ERROR):
        beat = schedulers(clock)
    skipped = {name for name in app.conf.beat_schedule if name != "good"}
    assert set(beat.broken) == skipped
    assert set(beat.entries) == {"good", "celery.backend_cleanup"}  # Celery's default entry too
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for name in skipped:
        assert f"'{name}'" in logged
    assert "out of range" in logged and "unknown schedule type" in logged
    ticks(beat)
    clock.advance(60)
    drain(beat)
    assert broker.slots() == [("good", iso(START + MINUTE))]


def test_reloading_finds_schedule_changes(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, redis_url: str, key_prefix: str
) -> None:
    app.conf.beat_schedule = {
        "kept": {"task": "t", "schedule": hashcron("* * * * *")},
        "removed": {"task": "t", "schedule": hashcron("* * * * *")},
    }
    beat = schedulers(clock)
    ticks(beat)
    clock.advance(60)
    drain(beat)
    app.conf.beat_schedule = {
        "kept": {"task": "t", "schedule": hashcron("* * * * *")},
        "added": {"task": "t", "schedule": hashcron("*/2 * * * *")},
    }
    beat.setup_schedule()
    broker.new()
    clock.advance(60)
    drain(beat)
    assert sorted(h["hashbeat_entry"] for h in broker.new()) == ["added", "kept"]
    # The next leader forgets the fences of entries no longer in the schedule.
    beat.close()
    store = open_store(redis_url, key_prefix)
    assert set(store.last_slots()) == {"kept", "removed", "added"}
    ticks(schedulers(clock))
    assert set(store.last_slots()) == {"kept", "added"}
    store.close()


def test_idle_tick_sleeps_exactly_until_just_before_the_next_slot(
    app: Celery, clock: Clock, schedulers: Make
) -> None:
    """Woken LEAD_MS before the slot, to take it off the queue and claim it at its instant."""
    app.conf.beat_schedule = {"e": {"task": "t", "schedule": hashinterval(60, key="fixed")}}
    offset = hashinterval(60, key="fixed").next_slot(START - 1) - START
    beat = schedulers(clock)
    beat.tick()
    assert beat.is_leader
    clock.now = T0 + (offset - 250) / 1000
    assert beat.tick() == pytest.approx(0.25 - LEAD_MS / 1000, abs=1e-6)
    clock.now = T0 + (offset - 5000) / 1000
    # The next read of the runtime controls comes first (before the lease renewal, 1 s); it is
    # due on the real monotonic clock, so a loaded machine may already have used some of it.
    assert 0 < beat.tick() <= POLL_S


def test_standby_and_handover_on_close(
    app: Celery, clock: Clock, schedulers: Make, redis_url: str, key_prefix: str
) -> None:
    first, second = schedulers(clock), schedulers(clock)
    ticks(first, second)
    assert first.is_leader and not second.is_leader
    assert 0 < second.tick() <= 1.0  # a standby tries again within a second
    store = open_store(redis_url, key_prefix)
    roles = {beat.token: beat.role for beat in store.beats()}
    assert roles == {first.token: "leader", second.token: "standby"}
    assert first.token.split(":")[:2] == [socket.gethostname(), str(os.getpid())]
    first.close()
    assert store.leader() is None  # released at once, not left to lapse
    started = time.monotonic()
    run_for(second, 3.0, until=lambda: second.is_leader)
    assert second.is_leader and time.monotonic() - started < 1.5
    store.close()
