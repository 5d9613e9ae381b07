"""The leader wakes LEAD_MS before a slot and takes it off the queue then (``beat/instants.py``),
but claims it, and so sends it, only once its clock reads the slot's instant: against the real
Redis (store and broker), on a clock the tests move."""

from __future__ import annotations

from typing import Any

from celery import Celery

from celery_hashbeat import Scheduler, hashinterval
from celery_hashbeat.beat.instants import LEAD_MS
from celery_hashbeat.store import open_store
from tests.support.beat_fixtures import START, T0, Broker, Clock, Make, iso

KEY = "fixed"


def _leading_with_one_entry(app: Celery, clock: Clock, schedulers: Make) -> tuple[Scheduler, int]:
    app.conf.beat_schedule = {"e": {"task": "t", "schedule": hashinterval(60, key=KEY)}}
    slot = hashinterval(60, key=KEY).next_slot(START - 1)
    beat = schedulers(clock)
    beat.tick()
    assert beat.is_leader
    return beat, slot


def _claims_seen(beat: Scheduler, clock: Clock) -> list[float]:
    """The clock's reading (ms) at each claim the beat makes."""
    store: Any = beat.store_calls.store
    claim = store.claim
    seen: list[float] = []

    def claim_noted(*args: Any, **kwargs: Any) -> Any:
        seen.append(clock.now * 1000)
        return claim(*args, **kwargs)

    store.claim = claim_noted
    return seen


def test_a_clock_short_of_the_instant_claims_and_sends_nothing(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, redis_url: str, key_prefix: str
) -> None:
    beat, slot = _leading_with_one_entry(app, clock, schedulers)
    claims = _claims_seen(beat, clock)
    clock.now = T0 + (slot - START - 1) / 1000  # within the lead, and the clock stands still
    wait = beat.tick()
    assert claims == [] and broker.new() == []
    assert beat.dispatcher.queue.head() == slot  # back on the queue, due as before
    assert 0 <= wait <= LEAD_MS / 1000
    store = open_store(redis_url, key_prefix)
    try:
        assert "e" not in store.last_slots()
    finally:
        store.close()
    clock.now = T0 + (slot - START) / 1000
    beat.tick()
    assert claims == [slot]
    assert [headers["hashbeat_slot"] for headers in broker.new()] == [iso(slot)]


def test_woken_early_the_claim_leaves_at_the_instant(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    beat, slot = _leading_with_one_entry(app, clock, schedulers)
    claims = _claims_seen(beat, clock)
    clock.now = T0 + (slot - START - LEAD_MS) / 1000

    def moving() -> float:  # a clock that moves as the beat reads it, by 0.1 ms a read
        clock.now += 0.0001
        return clock.now

    beat.clock = moving
    beat.tick()  # the one tick woken before the slot sends it
    assert len(claims) == 1 and claims[0] >= slot
    assert [headers["hashbeat_slot"] for headers in broker.new()] == [iso(slot)]
    beat.tick()
    assert broker.new() == [] and len(claims) == 1
