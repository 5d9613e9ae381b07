"""At a slot the leader claims the due slots and, while the claim is in flight, the broker's
thread stages their messages and waits at a gate (``publish/gate.py``): once the claim answers,
only the claimed ones go, announced then. Against the real Redis (store and broker), on a clock
the tests move."""

from __future__ import annotations

import threading
import time
from typing import Any

import redis
from celery import Celery

from celery_hashbeat import Scheduler, hashinterval
from celery_hashbeat.store.redis.keys import Keys
from tests.support.beat_fixtures import START, T0, Broker, Clock, Make

NAMES = ("a", "b", "c")
#: How long the claim waits for the staging to show (seconds): far beyond a loaded machine's.
STAGED_WITHIN_S = 5.0


def _three_due_together(app: Celery, clock: Clock, schedulers: Make) -> tuple[Scheduler, int]:
    schedule = hashinterval(60, key="together")  # one key: the same slot for all three
    app.conf.beat_schedule = {name: {"task": "t", "schedule": schedule} for name in NAMES}
    slot = schedule.next_slot(START - 1)
    beat = schedulers(clock)
    beat.tick()
    assert beat.is_leader
    return beat, slot


def _staged_during_claims(beat: Scheduler) -> list[int]:
    """For each claim the beat makes: how many messages the broker's thread had staged by the
    time the claim answered, waiting for it (the claim holds its answer until they are all
    staged, or ``STAGED_WITHIN_S``)."""
    store: Any = beat.store_calls.store
    claim = store.claim
    staged: list[int] = []

    def claim_then_look(token: str, slots: Any, *args: Any, **kwargs: Any) -> Any:
        answer = claim(token, slots, *args, **kwargs)
        sink: Any = beat.publisher.sink
        deadline = time.monotonic() + STAGED_WITHIN_S
        while len(sink._unsent) < len(slots) and time.monotonic() < deadline:
            time.sleep(0.001)
        staged.append(len(sink._unsent))
        return answer

    store.claim = claim_then_look
    return staged


def _announced(beat: Scheduler) -> list[str]:
    """The entries the beat announced (``Dispatcher.announce``: its log line, a run it
    replaces), in order."""
    announced: list[str] = []
    announce = beat.dispatcher.announce

    def noted(entry: Any, task_id: str, when: str) -> None:
        announced.append(entry.name)
        announce(entry, task_id, when)

    beat.dispatcher.announce = noted  # type: ignore[method-assign]
    beat.publisher._announce = noted
    beat.publisher.sink._announce = noted  # type: ignore[union-attr]
    return announced


def test_the_messages_are_staged_before_the_claim_answers(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    beat, slot = _three_due_together(app, clock, schedulers)
    staged = _staged_during_claims(beat)
    clock.now = T0 + (slot - START) / 1000
    beat.tick()
    assert staged == [3]
    assert sorted(headers["hashbeat_entry"] for headers in broker.new()) == sorted(NAMES)


def test_a_slot_the_claim_refused_is_staged_but_never_announced_or_sent(
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    redis_url: str,
    key_prefix: str,
) -> None:
    beat, slot = _three_due_together(app, clock, schedulers)
    staged = _staged_during_claims(beat)
    announced = _announced(beat)
    client = redis.Redis.from_url(redis_url)
    try:  # the store's record says "b" was sent at this slot (a backfill did): refused
        client.zadd(Keys(key_prefix).sent, {f"{slot}|b": slot})
    finally:
        client.close()
    clock.now = T0 + (slot - START) / 1000
    beat.tick()
    assert staged == [3]
    assert sorted(announced) == ["a", "c"]
    assert sorted(headers["hashbeat_entry"] for headers in broker.new()) == ["a", "c"]
    assert beat.publisher.sink._unsent == type(beat.publisher.sink._unsent)()  # type: ignore[union-attr]


def test_a_claim_that_fails_drops_what_was_staged_and_the_publish_thread_goes_on(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    beat, slot = _three_due_together(app, clock, schedulers)
    store: Any = beat.store_calls.store
    claim = store.claim
    staging = threading.Event()

    def claim_fails(*args: Any, **kwargs: Any) -> Any:
        sink: Any = beat.publisher.sink
        deadline = time.monotonic() + STAGED_WITHIN_S
        while len(sink._unsent) < len(NAMES) and time.monotonic() < deadline:
            time.sleep(0.001)
        staging.set()
        raise ConnectionError("the store's reply was lost")

    store.claim = claim_fails
    clock.now = T0 + (slot - START) / 1000
    beat.tick()
    assert staging.is_set()
    assert broker.new() == []
    store.claim = claim
    clock.now += 5  # the store answers again: the slots are claimed and sent, once
    deadline = time.monotonic() + 10
    sent: list[Any] = []
    while len(sent) < len(NAMES) and time.monotonic() < deadline:
        beat.tick()
        sent += broker.new()
        clock.now += 1
    assert sorted(headers["hashbeat_entry"] for headers in sent) == sorted(NAMES)
