"""A leader with time to spare before its next wake-up makes its entries' plans and stencils, as
a standby does, so that the first burst after a start only fills stencils in (issue 28: the first
burst of 10,000 slots after a start cost ~9x a later one); with a slot close, it makes none."""

from __future__ import annotations

from celery import Celery

from celery_hashbeat import hashcron
from tests.support.beat_fixtures import (
    MINUTE,
    START,
    Broker,
    Clock,
    Make,
    assert_each_sent_at,
    drain,
)

ENTRIES = 40


def configure(app: Celery, expression: str = "* * * * *") -> None:
    app.conf.beat_schedule = {
        f"idle-{i}": {"task": "idle.tick", "schedule": hashcron(expression), "args": (i,)}
        for i in range(ENTRIES)
    }


def test_a_leader_waiting_for_its_first_slot_makes_its_plans_and_sends_nothing_early(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    configure(app)
    leader = schedulers(clock)
    for _ in range(200):
        leader.tick()
        if leader.publisher.kept >= ENTRIES:
            break
    assert leader.leadership.lease.leader
    assert leader.publisher.kept >= ENTRIES, "the leader made no plans while it waited"
    assert broker.new() == [], "a message went out before its slot"
    assert leader.tick() > 0, "the walk ended, yet the leader does not sleep"
    clock.advance(60)
    drain(leader)
    names = [f"idle-{i}" for i in range(ENTRIES)]
    assert_each_sent_at(broker.new(), names, START + MINUTE)


def test_a_leader_whose_next_slot_is_close_makes_no_plans_before_it(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    """Slots every second leave no time to spare: warming would delay them."""
    configure(app, "* * * * * *")
    clock.now += 0.5  # the next slot is half a second away, outside the messages made ahead
    leader = schedulers(clock)
    for _ in range(5):
        wait = leader.tick()
    assert leader.leadership.lease.leader
    assert 0 < wait <= 0.5
    assert leader.publisher.kept == 0
    assert broker.new() == []
