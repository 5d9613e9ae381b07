"""The leader wakes LEAD_MS before a slot, takes it off the queue, claims it and stages its message
then (``beat/instants.py``), but sends it only once its clock reads the slot's instant, and gives
the claim back if the clock does not get there: against the real Redis (store and broker), on a
clock the tests move."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from celery.signals import after_task_publish

from celery_hashbeat import Scheduler, hashinterval
from celery_hashbeat.beat import instants
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


@pytest.fixture
def published_at(clock: Clock) -> Iterator[list[float]]:
    """The clock's reading (ms) as each message reached the broker (after_task_publish)."""
    seen: list[float] = []

    def noted(**_: Any) -> None:
        seen.append(clock.now * 1000)

    after_task_publish.connect(noted, weak=False)
    try:
        yield seen
    finally:
        after_task_publish.disconnect(noted)


def test_a_clock_short_of_the_instant_sends_nothing_and_gives_the_claim_back(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, redis_url: str, key_prefix: str
) -> None:
    beat, slot = _leading_with_one_entry(app, clock, schedulers)
    claims = _claims_seen(beat, clock)
    clock.now = T0 + (slot - START - 1) / 1000  # within the lead, and the clock stands still
    wait = beat.tick()
    assert claims and broker.new() == []  # claimed (each time it was taken) and not sent
    assert beat.dispatcher.queue.head() == slot  # back on the queue, due as before
    assert 0 <= wait <= LEAD_MS / 1000
    store = open_store(redis_url, key_prefix)
    try:
        assert "e" not in store.last_slots()  # given back: the store holds no claim of it
    finally:
        store.close()
    claims.clear()
    clock.now = T0 + (slot - START) / 1000
    beat.tick()
    assert claims == [slot]  # claimed again, as a slot given back is
    assert [headers["hashbeat_slot"] for headers in broker.new()] == [iso(slot)]


def test_woken_early_the_slot_is_claimed_then_and_sent_at_its_instant(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, published_at: list[float]
) -> None:
    beat, slot = _leading_with_one_entry(app, clock, schedulers)
    claims = _claims_seen(beat, clock)
    clock.now = T0 + (slot - START - LEAD_MS) / 1000

    def moving() -> float:  # a clock that moves as the beat reads it, by 0.1 ms a read
        clock.now += 0.0001
        return clock.now

    beat.clock = moving
    beat.tick()  # the one tick woken before the slot sends it
    assert len(claims) == 1 and claims[0] < slot  # claimed ahead of its instant
    assert len(published_at) == 1 and published_at[0] >= slot  # and sent at it, not before
    assert [headers["hashbeat_slot"] for headers in broker.new()] == [iso(slot)]
    beat.tick()
    assert broker.new() == [] and len(claims) == 1


def test_the_wait_for_an_instant_never_sleeps_past_it(
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    monkeypatch: Any,
    published_at: list[float],
) -> None:
    """The clock reads a fraction of a millisecond short of the instant: whole milliseconds
    would make the wait look up to a millisecond longer than it is, and the sleep overshoot."""
    beat, slot = _leading_with_one_entry(app, clock, schedulers)
    claims = _claims_seen(beat, clock)
    instant_s = T0 + (slot - START) / 1000
    slept_until: list[float] = []

    def sleep(seconds: float) -> None:  # the clock moves by exactly what was slept
        clock.now += seconds
        slept_until.append(clock.now)

    def moving() -> float:  # and by 0.01 ms a read, as a busy wait sees it
        clock.now += 0.00001
        return clock.now

    beat.clock = moving
    for short_ms in (0.1, 0.4, 1.9, 2.6, LEAD_MS - 0.5):
        clock.now = instant_s - short_ms / 1000
        with monkeypatch.context() as patched:
            patched.setattr(instants.time, "sleep", sleep)
            beat.tick()
        assert all(until <= instant_s + 1e-9 for until in slept_until), (short_ms, slept_until)
        assert len(claims) == 1  # claimed once
        assert len(published_at) == 1 and published_at[0] >= slot - 1e-6  # not sent early
        assert [headers["hashbeat_slot"] for headers in broker.new()] == [iso(slot)]
        claims.clear()
        published_at.clear()
        slept_until.clear()
        instant_s += 60  # the entry's next slot
        slot += 60_000
