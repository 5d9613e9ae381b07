"""Celery tells the result backend of every task it sends (``on_task_call``: the RPC backend
declares its reply queue, the Redis backend starts listening for the result); the batch path
does too, for every slot whose task keeps its result, and asks the backend once per thread."""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.backends.base import DisabledBackend

from celery_hashbeat import hashcron
from tests.support.beat_fixtures import Broker, Clock, Make, drain

#: The task ids the backend was told of, in order.
HEARD_IDS: list[str] = []


def nothing() -> None:
    """The entries' task (never run: no worker)."""


class ListeningBackend(DisabledBackend):
    """A backend that stores nothing and notes each task it is told of."""

    def on_task_call(self, producer: Any, task_id: str) -> dict[str, Any]:
        HEARD_IDS.append(task_id)
        return {}


def test_the_backend_hears_each_slot_of_a_task_that_keeps_its_result(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.result_backend = f"{__name__}:ListeningBackend"
    app.task(name="heard.keeps", shared=False)(nothing)
    app.task(name="heard.ignores", shared=False, ignore_result=True)(nothing)
    every = hashcron("* * * * *")
    app.conf.beat_schedule = {
        "keeps": {"task": "heard.keeps", "schedule": every},
        "ignores": {"task": "heard.ignores", "schedule": every},
    }
    HEARD_IDS.clear()
    beat = schedulers(clock)
    assert beat.publisher.sink is not None, "the batch path is the one under test"
    for _ in range(3):  # three minutes' slots
        drain(beat)
        clock.advance(60)
    sent = broker.new()
    keeps = [h["id"] for h in sent if h["hashbeat_entry"] == "keeps"]
    assert len(keeps) >= 2 and len(sent) == 2 * len(keeps), sent
    assert keeps == HEARD_IDS  # each once, in the order sent; none for "ignores"
