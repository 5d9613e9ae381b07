"""On RabbitMQ a chunk's first messages are written while the rest are made
(``WRITE_AHEAD_BYTES``), and the account stays exact (docs/design.md §15): a real broker on a
private vhost, a chunk far larger than the write ahead, and one message in its first write to an
exchange deleted since the beat looked it up. The broker closes the channel over it and discards
what follows on that channel, written ahead or not: the messages before it arrive, it is dropped,
and every one after it is written again and arrives once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from kombu import Connection, Exchange

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.publish.batch import Outcome
from celery_hashbeat.publish.message import slot_iso
from celery_hashbeat.publish.transports.amqp import WRITE_AHEAD_BYTES, AmqpWrites
from tests.support.rabbitmq import private_vhost, unavailable
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

QUEUE, BAD_EXCHANGE = "work", "deleted-exchange"
#: Messages in the chunk: far more than one write ahead holds.
GOOD = 300
#: Where the bad entry's message sits: inside the chunk's first write ahead.
BAD_AT = 10
SLOT_MS = 1_893_456_060_000  # 2030-01-01T00:01:00Z


@pytest.fixture
def vhost() -> Iterator[str]:
    with private_vhost() as url:
        yield url


def beat_on(vhost: str, store_url: str, confirms: bool) -> Scheduler:
    app = Celery("ahead", set_as_current=False, broker=vhost)
    schedule: dict[str, dict[str, Any]] = {
        f"good-{i:03d}": {"task": "ahead.tick", "schedule": hashcron("* * * * *"), "args": (i,)}
        for i in range(GOOD)
    }
    schedule["bad"] = {
        "task": "ahead.tick",
        "schedule": hashcron("* * * * *"),
        "options": {"exchange": BAD_EXCHANGE, "routing_key": QUEUE},
    }
    app.conf.update(
        task_default_queue=QUEUE,
        beat_schedule=schedule,
        hashbeat_store_url=store_url,
        hashbeat_key_prefix=f"ahead-{uuid.uuid4().hex[:8]}",
        broker_transport_options={"confirm_publish": confirms},
    )
    app.task(name="ahead.tick", shared=False)(lambda *args: None)
    beat = Scheduler(app, lazy=True)
    beat.setup_schedule()
    beat.tick()  # takes the lease
    return beat


def queued_task_ids(vhost: str) -> list[str]:
    ids = []
    with Connection(vhost) as connection:
        channel = connection.default_channel
        while (message := channel.basic_get(QUEUE, no_ack=True)) is not None:
            ids.append(f"{message.headers['hashbeat_entry']} {message.headers['hashbeat_slot']}")
    return ids


@pytest.mark.parametrize("confirms", [False, True], ids=["no-confirms", "confirms"])
def test_a_channel_closed_under_a_written_ahead_chunk_loses_and_doubles_nothing(
    confirms: bool, vhost: str, private_redis: RedisProcess
) -> None:
    with Connection(vhost) as connection:
        channel = connection.default_channel
        Exchange(BAD_EXCHANGE, "direct", durable=False)(channel).declare()
    beat = beat_on(vhost, private_redis.url, confirms)
    try:
        entries = sorted(beat.entries.values(), key=lambda entry: entry.name)
        bad = next(entry for entry in entries if entry.name == "bad")
        good = [entry for entry in entries if entry is not bad]
        order = [*good[:BAD_AT], bad, *good[BAD_AT:]]
        # A first chunk while the exchange exists: the plans, and its lookup, are made.
        first = beat.dispatcher.publish([(entry, SLOT_MS - 60_000) for entry in order])
        assert {settled.outcome for settled in first} == {Outcome.SENT}
        assert len(queued_task_ids(vhost)) == len(good)  # the bad one had no queue bound
        output = beat.publisher.sink._output  # type: ignore[union-attr]
        assert isinstance(output, AmqpWrites)
        chunk_bytes = sum(len(plan.stencil.frames) for plan in beat.publisher.sink._plans.values())  # type: ignore[union-attr]
        assert chunk_bytes > 3 * WRITE_AHEAD_BYTES, "the chunk would not be written ahead"

        with Connection(vhost) as connection:
            connection.default_channel.exchange_delete(BAD_EXCHANGE)
        settled = beat.dispatcher.publish([(entry, SLOT_MS) for entry in order])

        outcomes = {each.entry.name: each.outcome for each in settled}
        assert outcomes.pop("bad") is Outcome.DROPPED
        assert set(outcomes.values()) == {Outcome.SENT}
        ids = queued_task_ids(vhost)
        # Every good message once (Celery's own backend_cleanup among them), none twice.
        assert sorted(ids) == sorted(f"{entry.name} {slot_iso(SLOT_MS)}" for entry in good)
    finally:
        beat.close()
        beat.app.close()
