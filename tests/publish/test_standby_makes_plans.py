"""A standby makes its entries' plans and message stencils while another beat leads, sending
nothing, so that its first burst after taking over only fills stencils in (issue 28: the first
burst after a take-over cost 4x the later ones)."""

from __future__ import annotations

import json
from typing import Any

import redis
from celery import Celery, signals

from celery_hashbeat import hashcron
from tests.support.beat_fixtures import (
    MINUTE,
    START,
    Broker,
    Clock,
    Make,
    assert_each_sent_at,
    drain,
    run_for,
)

ENTRIES = 40


def configure(app: Celery) -> None:
    app.conf.beat_schedule = {
        f"warm-{i}": {"task": "warm.tick", "schedule": hashcron("* * * * *"), "args": (i,)}
        for i in range(ENTRIES)
    }


def stand_by_until_warm(standby: Any, ticks: int = 200) -> None:
    for _ in range(ticks):
        standby.tick()
        if standby.publisher.kept >= ENTRIES:
            return


def test_a_standby_makes_its_plans_and_sends_nothing(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    configure(app)
    leader = schedulers(clock)
    drain(leader)
    broker.new()
    standby = schedulers(clock)
    stand_by_until_warm(standby)
    assert not standby.leadership.lease.leader
    assert standby.publisher.kept >= ENTRIES
    assert broker.new() == [], "a standby sent messages"


def test_after_taking_over_the_made_stencils_send_each_slot_right(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, redis_url: str
) -> None:
    configure(app)
    leader = schedulers(clock)
    drain(leader)
    standby = schedulers(clock)
    stand_by_until_warm(standby)
    leader.close()
    broker.new()
    run_for(standby, 10, until=lambda: standby.leadership.lease.leader)
    assert standby.leadership.lease.leader
    clock.advance(60)
    drain(standby)
    names = [f"warm-{i}" for i in range(ENTRIES)]
    assert_each_sent_at(broker.new(), names, START + MINUTE)
    client = redis.Redis.from_url(redis_url)
    try:
        raw = [json.loads(m) for m in client.lrange(app.conf.task_default_queue, 0, -1)]
    finally:
        client.close()
    tags = [m["properties"]["delivery_tag"] for m in raw]
    assert len(set(tags)) == len(tags), "two messages share a delivery tag"


def test_a_standby_makes_no_message_a_before_task_publish_receiver_would_see(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    configure(app)
    leader = schedulers(clock)
    drain(leader)
    seen: list[object] = []

    def receiver(**kwargs: object) -> None:
        seen.append(kwargs.get("headers"))

    signals.before_task_publish.connect(receiver, weak=False)
    try:
        standby = schedulers(clock)
        for _ in range(20):
            standby.tick()
    finally:
        signals.before_task_publish.disconnect(receiver)
    assert seen == []
