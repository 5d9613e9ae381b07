"""Where the batch path does not go (issue 12): a transport it does not know, and a subclass that
replaces ``send``, publish one message at a time through ``apply_async``, as before."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from celery import Celery, signals

from celery_hashbeat import Scheduler, hashcron
from tests.support.beat_fixtures import Clock

NAMES = ["a", "b", "c"]


@pytest.fixture
def published() -> Iterator[list[str]]:
    """The hashbeat_entry of every message published, from after_task_publish."""
    seen: list[str] = []

    def record(headers: dict[str, Any] | None = None, **_: Any) -> None:
        if headers and "hashbeat_entry" in headers:
            seen.append(headers["hashbeat_entry"])

    signals.after_task_publish.connect(record, weak=False)
    yield seen
    signals.after_task_publish.disconnect(record)


def every_minute(app: Celery) -> None:
    app.conf.beat_schedule = {
        name: {"task": "shop.tick", "schedule": hashcron("* * * * *")} for name in NAMES
    }


def run_two_minutes(beat: Scheduler, clock: Clock) -> None:
    """Two minutes of slots. A fifth of a second before each, when the batch path would make
    its messages, the beat (which makes none ahead here) sleeps until the slot."""
    beat.tick()
    for _ in range(2):
        clock.advance(59.8)
        # A lease call or a poll may fall due meanwhile (on the real clock): a few ticks.
        waits = [beat.tick() for _ in range(3)]
        assert 0 < max(waits) <= 0.2 + 1e-6
        clock.advance(0.2)
        beat.tick()


def test_a_transport_it_does_not_know_publishes_one_by_one_and_says_so_once(
    app: Celery,
    schedulers: Callable[..., Scheduler],
    clock: Clock,
    published: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    app.conf.broker_url = "memory://"
    every_minute(app)
    beat = schedulers(clock)
    with caplog.at_level(logging.INFO, logger="celery_hashbeat.scheduler"):
        run_two_minutes(beat, clock)
    assert beat.publisher.sink is None
    assert sorted(published) == sorted(NAMES * 2)
    said = [r.getMessage() for r in caplog.records if "one message at a time" in r.getMessage()]
    assert said == [
        "beat: publishing one message at a time: the batch path does not know the 'memory' "
        "transport (it knows redis, amqp)"
    ]


class OwnSend(Scheduler):
    """A subclass with its own ``send`` (as benchmarks and users write them)."""

    sent: list[str]

    def send(self, entry: Any, task_id: str, when: str) -> Any:
        self.sent.append(entry.name)
        return super().send(entry, task_id, when)


def test_a_subclass_that_replaces_send_gets_every_slot_through_it(
    app: Celery, clock: Clock, published: list[str]
) -> None:
    every_minute(app)
    beat = OwnSend(app, lazy=True)
    beat.sent = []
    beat.clock = clock
    beat.setup_schedule()
    try:
        run_two_minutes(beat, clock)
    finally:
        beat.close()
    assert beat.publisher.sink is None
    assert sorted(beat.sent) == sorted(published) == sorted(NAMES * 2)
