"""Fixtures for the tests that run the Scheduler in-process (tests/beat, tests/entries,
tests/publish, tests/control and tests/test_settings.py): a Celery app on the real Redis (as
broker and as store), a clock the test moves, and a reader for what beat really put on the broker
queue. tests/conftest.py re-exports the fixtures, so every room has them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from celery import Celery

from celery_hashbeat import Scheduler
from celery_hashbeat.publish.message import slot_iso, slot_task_id

#: A whole minute (2030-01-01T00:00:00Z), so that slots in the tests are easy to read.
T0 = 1_893_456_000.0
#: T0 in epoch milliseconds, as slots are counted.
START = int(T0 * 1000)
MINUTE = 60_000

#: What the ``schedulers`` fixture is: makes a beat, optionally on a clock or another app.
Make = Callable[..., Scheduler]


@dataclass
class Clock:
    """The only thing the tests fake: the wall clock the scheduler computes slots from."""

    now: float = T0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Broker:
    """The broker queue of one test, read straight from Redis: what beat really published."""

    client: redis.Redis
    queue: str
    seen: int = field(default=0)

    def headers(self) -> list[dict[str, Any]]:
        """The headers of every message published so far, oldest first."""
        raw = self.client.lrange(self.queue, 0, -1)
        return [json.loads(message)["headers"] for message in reversed(raw)]

    def new(self) -> list[dict[str, Any]]:
        """The headers published since the last call."""
        found = self.headers()
        fresh, self.seen = found[self.seen :], len(found)
        return fresh

    def slots(self, entry: str | None = None) -> list[tuple[str, str]]:
        """(entry, slot) of every message, for one entry or all."""
        return [
            (h["hashbeat_entry"], h["hashbeat_slot"])
            for h in self.headers()
            if entry is None or h["hashbeat_entry"] == entry
        ]


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[Celery]:
    """An app whose broker and store are the session Redis, kept apart by the test's prefix."""
    app = Celery(f"hashbeat-{key_prefix}", set_as_current=False)
    app.conf.update(
        broker_url=redis_url,
        task_default_queue=f"{key_prefix}-queue",
        beat_enable_remote_control=False,
        hashbeat_store_url=redis_url,
        hashbeat_key_prefix=key_prefix,
        hashbeat_lease_ttl=3,
        beat_schedule={},
    )
    yield app
    app.close()


@pytest.fixture
def broker(app: Celery, redis_url: str) -> Iterator[Broker]:
    client = redis.Redis.from_url(redis_url)
    yield Broker(client, app.conf.task_default_queue)
    client.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def schedulers(app: Celery) -> Iterator[Callable[..., Scheduler]]:
    """Makes schedulers (beats) on the test's app, optionally on a given clock; closes them all."""
    made: list[Scheduler] = []

    def make(clock: Callable[[], float] | None = None, target: Celery | None = None) -> Scheduler:
        scheduler = Scheduler(target or app, lazy=True)
        if clock is not None:
            scheduler.clock = clock
        scheduler.setup_schedule()
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        scheduler.close()


def run_for(scheduler: Scheduler, seconds: float, until: Callable[[], bool] | None = None) -> None:
    """Tick as beat's loop does, in real time, for ``seconds`` or until ``until()`` holds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if until is not None and until():
            return
        wait = scheduler.tick()
        time.sleep(min(wait, 0.02, max(0.0, deadline - time.monotonic())))


def ticks(*schedulers: Scheduler, times: int = 3) -> None:
    """A few ticks of each scheduler in turn, as beats on a frozen clock would do."""
    for _ in range(times):
        for scheduler in schedulers:
            scheduler.tick()


def iso(ms: int) -> str:
    return slot_iso(ms)


def drain(scheduler: Scheduler, limit: int = 500) -> None:
    """Tick until nothing is due on the frozen clock."""
    for _ in range(limit):
        if scheduler.tick() > 0:
            return
    raise AssertionError("the scheduler never settled")


def assert_each_sent_at(headers: list[dict[str, Any]], names: list[str], slot: int) -> None:
    """Each of ``names`` sent once, for ``slot``, with the task id of that entry and slot."""
    assert sorted(h["hashbeat_entry"] for h in headers) == sorted(names)
    for h in headers:
        assert h["hashbeat_slot"] == iso(slot)
        assert h["id"] == slot_task_id(h["hashbeat_entry"], slot)
