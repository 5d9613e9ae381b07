"""A leader whose broker has taken nothing for longer than a publish may wait steps down before
it waits on that broker again for what is due (docs/design.md §10): otherwise each retry of a
hung broker costs another full wait before the standby may take over (issue 22, defect 3)."""

from __future__ import annotations

import time

from celery import Celery

from celery_hashbeat import hashcron
from tests.support.beat_fixtures import Broker, Clock, Make, drain


def test_a_stuck_leader_with_a_slot_due_gives_up_the_lease_without_publishing(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"every-second": {"task": "t", "schedule": hashcron("* * * * * *")}}
    beat = schedulers(clock)
    drain(beat)
    assert beat.leadership.lease.leader
    broker.new()
    publishes: list[int] = []
    publish = beat.dispatcher.publish

    def counted(slots: list[tuple[object, int]]) -> object:
        publishes.append(len(slots))
        return publish(slots)  # type: ignore[arg-type]

    beat.dispatcher.publish = counted  # type: ignore[method-assign]
    # The broker has taken nothing for twice the longest a publish may wait (the one clock the
    # test moves: when the publisher's failures began).
    beat.publisher.failing_since = time.monotonic() - 2 * beat.publisher.timeout_s
    clock.advance(1)
    beat.tick()
    assert not beat.leadership.lease.leader, "a stuck leader kept the lease"
    assert publishes == [], "a stuck leader waited on its broker again first"
    assert broker.new() == []
