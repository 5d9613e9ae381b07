"""The beat's side of per-worker copies (docs/design.md §11): one copy of an entry for each listed
or live worker, on its direct queue, in-process schedulers against the real Redis (store and
broker) on a clock the tests move; tests/worker runs real workers."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import redis
from celery import Celery
from celery.utils.nodenames import worker_direct

from celery_hashbeat import hashcron
from celery_hashbeat.store import Store, open_store
from tests.support.beat_fixtures import START, Clock, Make, drain, ticks


@pytest.fixture
def store(app: Celery) -> Iterator[Store]:
    opened = open_store(app.conf.hashbeat_store_url, app.conf.hashbeat_key_prefix)
    yield opened
    opened.close()


def copies(beat: object) -> list[str]:
    return sorted(name for name in beat.schedule if name.startswith("refresh@"))  # type: ignore[attr-defined]


def test_listed_workers_get_one_copy_each_on_their_direct_queue(
    app: Celery, clock: Clock, schedulers: Make, store: Store, redis_url: str
) -> None:
    nodes = ["celery@web-1", "celery@web-2"]
    app.conf.worker_direct = True
    app.conf.beat_schedule = {
        "refresh": {"task": "t", "schedule": hashcron("H * * * * *"), "workers": nodes}
    }
    beat = schedulers(clock)
    assert copies(beat) == [f"refresh@{node}" for node in nodes]
    drain(beat)
    clock.advance(60)
    drain(beat)
    client = redis.Redis.from_url(redis_url)
    try:
        for node in nodes:
            messages = client.lrange(worker_direct(node).name, 0, -1)
            entries = {json.loads(m)["headers"]["hashbeat_entry"] for m in messages}
            assert entries == {f"refresh@{node}"}, (node, entries)
    finally:
        client.delete(*(worker_direct(node).name for node in nodes))
        client.close()
    assert set(store.last_slots()) == {f"refresh@{node}" for node in nodes}


def test_every_worker_follows_the_stored_roster_when_a_beat_takes_over(
    app: Celery, clock: Clock, schedulers: Make, store: Store
) -> None:
    app.conf.worker_direct = True
    app.conf.beat_schedule = {
        "refresh": {"task": "t", "schedule": hashcron("H * * * * *"), "workers": "*"}
    }
    assert store.acquire("former-leader", 60_000)
    assert store.set_roster("former-leader", ["celery@a", "celery@b"], START)
    store.release("former-leader")
    beat = schedulers(clock)
    assert copies(beat) == []  # no census seen yet: nothing to send
    ticks(beat)
    assert copies(beat) == ["refresh@celery@a", "refresh@celery@b"]


def test_worker_direct_off_is_named_once(
    app: Celery, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    app.conf.beat_schedule = {
        "refresh": {"task": "t", "schedule": hashcron("H * * * * *"), "workers": ["celery@a"]}
    }
    with caplog.at_level(logging.WARNING, logger="celery_hashbeat"):
        schedulers()
    warned = [r.getMessage() for r in caplog.records if "worker_direct" in r.getMessage()]
    assert len(warned) == 1, warned
