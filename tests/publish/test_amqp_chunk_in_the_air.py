"""On RabbitMQ the batch makes the next chunk while the broker handles the one written
(docs/design.md §15), against a real broker on a private vhost: every message arrives once,
a chunk goes only once the one before it has its answers, and the broker's answers are read by
the batch alone, whatever else the making of the next chunk does on the connection (py-amqp
reads the socket before each publish; a refused exchange closes the channel under a chunk)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from celery import Celery
from kombu import Connection, Exchange, Queue

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.publish.batch import Outcome, Undeliverable
from celery_hashbeat.publish.chunked import Bulk
from tests.support.beat_fixtures import T0, Clock
from tests.support.rabbitmq import private_vhost, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

SLOT = int((T0 + 60) * 1000)
QUEUE = "in-the-air"
#: The exchange one entry publishes to, deleted after the beat found it.
DOOMED = "doomed"


@pytest.fixture
def vhost() -> Iterator[str]:
    with private_vhost() as url:
        yield url


@pytest.fixture
def beat_on(
    vhost: str,
    redis_url: str,
    key_prefix: str,
    schedulers: Callable[..., Scheduler],
    clock: Clock,
) -> Iterator[Callable[[dict[str, dict[str, Any]]], Scheduler]]:
    """A beat whose broker is the private vhost; no tick yet, so every message is made in
    full (no plan, no stencil)."""
    made: list[Celery] = []

    def make(schedule: dict[str, dict[str, Any]]) -> Scheduler:
        app = Celery(f"air-{key_prefix}", set_as_current=False)
        app.conf.update(
            broker_url=vhost,
            task_default_queue=QUEUE,
            beat_enable_remote_control=False,
            hashbeat_store_url=redis_url,
            hashbeat_key_prefix=key_prefix,
            beat_schedule=schedule,
        )
        made.append(app)
        return schedulers(clock, target=app)

    yield make
    for app in made:
        app.close()


def every_minute(count: int, **options: Any) -> dict[str, dict[str, Any]]:
    return {
        f"e{i}": {"task": "shop.tick", "schedule": hashcron("* * * * *"), "options": options}
        for i in range(count)
    }


def run_in_chunks_of_two(beat: Scheduler, names: list[str]) -> dict[str, Outcome]:
    """One slot of each entry, in ``names`` order, through the batch sink in chunks of two;
    fails if the batch is still waiting on the broker after 20 seconds. A dropped slot must
    say it is undeliverable."""
    sink = beat.publisher.sink
    assert sink is not None and not sink.immediate
    slots = [(beat.entries[name], SLOT) for name in names]
    publisher = beat.publisher
    batch = Bulk(slots, sink, publisher.send_slot, publisher.transient_errors, publisher.connect, 2)
    runner = threading.Thread(target=batch.run, daemon=True)
    runner.start()
    runner.join(20)
    assert not runner.is_alive(), "the batch waits for an answer the broker gave already"
    settled = batch.settle()
    for entry, _, outcome, error in settled:
        assert (outcome is Outcome.DROPPED) == isinstance(error, Undeliverable), (entry, error)
    return {entry.name: outcome for entry, _, outcome, _ in settled}


def queued(vhost: str) -> list[str]:
    """The entries whose message is on the queue, oldest first (each taken off it)."""
    found: list[str] = []
    with Connection(vhost) as connection:
        channel = connection.default_channel
        while (message := channel.basic_get(QUEUE, no_ack=True)) is not None:
            found.append(message.headers["hashbeat_entry"])
    return found


def test_chunks_made_in_full_while_one_is_in_the_air_all_arrive_once(
    vhost: str, beat_on: Callable[[dict[str, dict[str, Any]]], Scheduler]
) -> None:
    beat = beat_on(every_minute(7))
    names = [f"e{i}" for i in range(7)]
    found = run_in_chunks_of_two(beat, names)
    assert found == dict.fromkeys(names, Outcome.SENT)
    assert queued(vhost) == names


def test_a_channel_closed_under_the_chunk_in_the_air_costs_only_the_refused_slot(
    vhost: str, beat_on: Callable[[dict[str, dict[str, Any]]], Scheduler]
) -> None:
    """The exchange is deleted after the beat found it: the broker closes the channel over
    the message in the air, while the next chunk is being made; the ones after it are written
    again on the reopened channel."""
    with Connection(vhost) as connection:
        channel = connection.default_channel
        Exchange(DOOMED, "direct")(channel).declare()
        Queue(QUEUE, Exchange(DOOMED, "direct"), routing_key=QUEUE)(channel).declare()
    schedule = every_minute(6)
    schedule["bad"] = {
        "task": "shop.tick",
        "schedule": hashcron("* * * * *"),
        "options": {"exchange": DOOMED, "routing_key": QUEUE},
    }
    beat = beat_on(schedule)
    # The first batch finds the exchange (and makes the plans); then it goes.
    assert run_in_chunks_of_two(beat, ["e0", "bad"]) == {"e0": Outcome.SENT, "bad": Outcome.SENT}
    assert queued(vhost) == ["e0", "bad"]
    with Connection(vhost) as connection:
        connection.default_channel.exchange_delete(DOOMED)

    names = ["e1", "bad", "e2", "e3", "e4", "e5"]
    batch_found = run_in_chunks_of_two(beat, names)
    assert batch_found == {
        "e1": Outcome.SENT,
        "bad": Outcome.DROPPED,
        "e2": Outcome.SENT,
        "e3": Outcome.SENT,
        "e4": Outcome.SENT,
        "e5": Outcome.SENT,
    }
    assert queued(vhost) == ["e1", "e2", "e3", "e4", "e5"]
