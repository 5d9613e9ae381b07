"""Celery's own beat Service runs the Scheduler (``-S hashbeat``) in a thread, a real worker runs
the tasks from the real Redis broker, and the tasks record what they saw."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from itertools import pairwise

import pytest
import redis
from celery import Celery
from celery.beat import Service
from celery.contrib.testing.worker import start_worker

from celery_hashbeat import hashcron, hashinterval
from celery_hashbeat.expr.slots import to_ms
from celery_hashbeat.publish.message import slot_task_id
from celery_hashbeat.store import open_store


@pytest.fixture
def runs(app: Celery, redis_url: str, key_prefix: str) -> Iterator[redis.Redis]:
    """A task that records its id and headers in Redis, and a client to read them."""
    client = redis.Redis.from_url(redis_url)
    key = f"{key_prefix}:runs"

    @app.task(bind=True, name="hashbeat.record")
    def record(self: object, label: str) -> None:
        request = self.request  # type: ignore[attr-defined]
        seen = {
            "label": label,
            "id": request.id,
            "entry": request.hashbeat_entry,
            "slot": request.hashbeat_slot,
        }
        client.rpush(key, json.dumps(seen))

    yield client
    client.close()


def recorded(client: redis.Redis, key: str) -> list[dict[str, str]]:
    return [json.loads(raw) for raw in client.lrange(key, 0, -1)]


def test_tasks_really_run_on_second_level_schedules(
    app: Celery, runs: redis.Redis, redis_url: str, key_prefix: str
) -> None:
    app.conf.beat_schedule = {
        "every-second": {
            "task": "hashbeat.record",
            "schedule": hashcron("* * * * * *"),
            "args": ("cron",),
        },
        "half-second": {
            "task": "hashbeat.record",
            "schedule": hashinterval(0.5),
            "args": ("interval",),
        },
        "plain": {"task": "hashbeat.record", "schedule": 1.0, "args": ("plain",)},
    }
    key = f"{key_prefix}:runs"
    service = Service(app, scheduler_cls="hashbeat", max_interval=1)
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        beat = threading.Thread(target=service.start, name="beat", daemon=True)
        beat.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            labels = Counter(run["label"] for run in recorded(runs, key))
            if min(labels["cron"], labels["interval"], labels["plain"]) >= 3:
                break
            time.sleep(0.1)
        service.stop()
        beat.join(10)
    assert not beat.is_alive()

    seen = recorded(runs, key)
    labels = Counter(run["label"] for run in seen)
    assert min(labels["cron"], labels["interval"], labels["plain"]) >= 3, labels
    for run in seen:
        slot = to_ms(datetime.fromisoformat(run["slot"]))
        assert run["id"] == slot_task_id(run["entry"], slot)
    assert len({run["id"] for run in seen}) == len(seen)  # no slot ran twice
    cron_slots = sorted(
        to_ms(datetime.fromisoformat(r["slot"])) for r in seen if r["label"] == "cron"
    )
    assert all(slot % 1000 == 0 for slot in cron_slots)
    assert all(b - a >= 1000 for a, b in pairwise(cron_slots))

    store = open_store(redis_url, key_prefix)
    assert store.leader() is None  # the stopped beat gave its lease back
    store.close()
