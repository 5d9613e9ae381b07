"""As the messages of a slot are made ahead of it, the broker's thread packs their Redis write
(``RedisPipeline.prepare``); at the slot the publish sends that write only if every slot was
claimed, and drops it otherwise, so an unclaimed slot's message never reaches the broker.
Against the real Redis (store and broker), on a clock the tests move."""

from __future__ import annotations

from typing import Any

import pytest
import redis
from celery import Celery

from celery_hashbeat import Scheduler, hashinterval
from celery_hashbeat.publish.transports import redis as redis_output
from celery_hashbeat.store import open_store
from celery_hashbeat.store.redis.keys import Keys
from tests.support.beat_fixtures import START, T0, Broker, Clock, Make, iso

NAMES = ("a", "b", "c")


def _three_due_together(
    app: Celery, clock: Clock, schedulers: Make, packs: list[int]
) -> tuple[Scheduler, int]:
    """Three entries due at one slot, led by one beat whose messages for it are made ahead."""
    schedule = hashinterval(60, key="together")  # one key: the same slot for all three
    app.conf.beat_schedule = {name: {"task": "t", "schedule": schedule} for name in NAMES}
    slot = schedule.next_slot(START - 1)
    beat = schedulers(clock)
    beat.tick()
    assert beat.is_leader
    clock.now = T0 + (slot - START - 200) / 1000
    beat.tick()  # makes the messages ahead, and packs their write
    assert beat.publisher.ahead.made_to >= slot
    assert packs == [3]
    return beat, slot


def _packs_counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages each write packed carries, in order."""
    packs: list[int] = []
    of = redis_output.Packed.of

    def counted(messages: Any, encode: Any) -> redis_output.Packed:
        packs.append(len(messages))
        return of(messages, encode)

    monkeypatch.setattr(redis_output.Packed, "of", counted)
    return packs


def test_every_slot_claimed_goes_out_in_the_write_packed_ahead(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    packs = _packs_counted(monkeypatch)
    beat, slot = _three_due_together(app, clock, schedulers, packs)
    clock.now = T0 + (slot - START) / 1000
    beat.tick()
    assert packs == [3]  # packed once, ahead, and that write sent
    sent = broker.new()
    assert sorted(headers["hashbeat_entry"] for headers in sent) == sorted(NAMES)
    assert {headers["hashbeat_slot"] for headers in sent} == {iso(slot)}


def test_an_unclaimed_slot_is_dropped_from_the_write_and_never_sent(
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    key_prefix: str,
) -> None:
    packs = _packs_counted(monkeypatch)
    beat, slot = _three_due_together(app, clock, schedulers, packs)
    # The store's record says "b" was sent at this slot (a backfill did): its claim is refused.
    client = redis.Redis.from_url(redis_url)
    try:
        client.zadd(Keys(key_prefix).sent, {f"{slot}|b": slot})
    finally:
        client.close()
    clock.now = T0 + (slot - START) / 1000
    beat.tick()
    assert packs == [3, 2]  # the write packed for three was dropped; two were packed again
    sent = broker.new()
    assert sorted(headers["hashbeat_entry"] for headers in sent) == ["a", "c"]
    store = open_store(redis_url, key_prefix)
    try:
        fences = store.fences()
        assert fences["a"].slot == fences["c"].slot == slot
        assert "b" not in fences or fences["b"].slot != slot  # never claimed, nothing to give
    finally:
        store.close()
    clock.now += 60
    beat.tick()
    assert "b" in {headers["hashbeat_entry"] for headers in broker.new()}  # its next slot goes
