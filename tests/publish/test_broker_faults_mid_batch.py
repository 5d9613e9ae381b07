"""Real broker faults in the middle of a batch (issue 12): the batch says exactly which slots went
out (kept), which surely did not (given back, and sent later) and which may have (kept, never sent
twice), checked against what the Redis broker really holds."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from celery import Celery

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.publish.batch import Outcome
from celery_hashbeat.publish.chunked import Bulk
from tests.support.beat_fixtures import T0, Clock
from tests.support.proxy import FaultProxy
from tests.support.redis_server import RedisProcess

SLOT = int((T0 + 60) * 1000)
NAMES = [f"e{i}" for i in range(6)]


@pytest.fixture
def beat_on(
    redis_url: str, key_prefix: str, schedulers: Callable[..., Scheduler], clock: Clock
) -> Iterator[Callable[[str], Scheduler]]:
    """A leading beat whose broker is at the given URL; the store stays on the session Redis."""
    made: list[Celery] = []

    def make(broker_url: str) -> Scheduler:
        app = Celery(f"faults-{key_prefix}", set_as_current=False)
        app.conf.update(
            broker_url=broker_url,
            # A lost reply ends a publish after a second (no retry: it could run a pipeline twice).
            broker_transport_options={"socket_timeout": 1.0},
            broker_connection_timeout=1.0,
            task_default_queue="faults",
            beat_enable_remote_control=False,
            hashbeat_store_url=redis_url,
            hashbeat_key_prefix=key_prefix,
            beat_schedule={
                name: {"task": "shop.tick", "schedule": hashcron("* * * * *")} for name in NAMES
            },
        )
        made.append(app)
        beat = schedulers(clock, target=app)
        beat.tick()
        assert beat.leadership.lease.leader
        return beat

    yield make
    for app in made:
        app.close()


def queued(server: RedisProcess) -> list[str]:
    """The entries whose message is on the broker's queue, oldest first."""
    client = redis.Redis.from_url(server.url)
    try:
        raw = client.lrange("faults", 0, -1)
    finally:
        client.close()
    return [json.loads(message)["headers"]["hashbeat_entry"] for message in reversed(raw)]


def run_with_fault_before_second_send(
    beat: Scheduler, monkeypatch: pytest.MonkeyPatch, fault: Callable[[], None]
) -> dict[str, Outcome]:
    """The six slots in chunks of two, ``fault()`` striking just before the second chunk is sent."""
    sink = beat.publisher.sink
    assert sink is not None and not sink.immediate
    send = sink.send
    sends = []

    def send_with_fault() -> None:
        sends.append(1)
        if len(sends) == 2:
            fault()
        send()

    monkeypatch.setattr(sink, "send", send_with_fault)
    slots = [(beat.entries[name], SLOT) for name in NAMES]
    batch = Bulk(
        slots,
        sink,
        beat.publisher.send_slot,
        beat.publisher.transient_errors,
        beat.publisher.connect,
        chunk=2,
    )
    batch.run()
    return {entry.name: outcome for entry, _, outcome, _ in batch.settle()}


def test_a_chunk_whose_reply_is_lost_is_unknown_and_kept(
    private_redis: RedisProcess,
    beat_on: Callable[[str], Scheduler],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FaultProxy(private_redis.port) as proxy:
        beat = beat_on(proxy.url())
        found = run_with_fault_before_second_send(beat, monkeypatch, lambda: proxy.swallow(5))
    assert found == {
        "e0": Outcome.SENT,
        "e1": Outcome.SENT,
        "e2": Outcome.UNKNOWN,  # the pipeline reached the broker; its reply never came back
        "e3": Outcome.UNKNOWN,
        "e4": Outcome.UNSENT,  # never sent: given back
        "e5": Outcome.UNSENT,
    }
    # Right to keep the unknown ones: they did arrive; and the given-back ones did not.
    assert queued(private_redis) == ["e0", "e1", "e2", "e3"]


def test_a_broker_killed_mid_batch_sends_nothing_after_the_chunks_it_took(
    private_redis: RedisProcess,
    beat_on: Callable[[str], Scheduler],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    beat = beat_on(private_redis.url)
    before_kill: list[list[str]] = []

    def kill() -> None:
        before_kill.append(queued(private_redis))
        private_redis.kill()

    found = run_with_fault_before_second_send(beat, monkeypatch, kill)
    assert before_kill == [["e0", "e1"]]
    assert (found["e0"], found["e1"]) == (Outcome.SENT, Outcome.SENT)
    # redis-py finds the pipeline's connection closed before writing to it, and connecting anew
    # is refused: surely not sent, so given back (a lost reply is the unknown case, above).
    assert (found["e2"], found["e3"]) == (Outcome.FAILED, Outcome.FAILED)
    assert (found["e4"], found["e5"]) == (Outcome.UNSENT, Outcome.UNSENT)


def test_slots_refused_by_a_dead_broker_are_given_back_and_sent_once_it_returns(
    private_redis: RedisProcess, beat_on: Callable[[str], Scheduler], clock: Clock
) -> None:
    beat = beat_on(private_redis.url)
    private_redis.kill()
    clock.advance(60)
    beat.tick()  # claims the six slots; the broker refuses: all given back
    assert beat.publisher.outage.cause is not None
    assert not beat.dispatcher.owed
    private_redis.start()
    clock.advance(1.5)
    beat.tick()
    assert sorted(queued(private_redis)) == NAMES
    assert beat.publisher.outage.cause is None


def test_what_reached_the_broker_is_never_sent_again(
    private_redis: RedisProcess,
    beat_on: Callable[[str], Scheduler],
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After a lost reply, the next ticks send only the slots that were given back."""
    with FaultProxy(private_redis.port) as proxy:
        beat = beat_on(proxy.url())
        sink: Any = beat.publisher.sink
        send = sink.send
        calls: list[int] = []

        def send_losing_second_reply() -> None:
            calls.append(1)
            if len(calls) == 1:
                proxy.swallow(5)
            send()

        monkeypatch.setattr(sink, "send", send_losing_second_reply)
        clock.advance(60)
        beat.tick()  # one chunk of six: its reply is lost
        proxy.pass_through()
        monkeypatch.setattr(sink, "send", send)
        for _ in range(3):
            clock.advance(1.5)
            beat.tick()
    assert sorted(queued(private_redis)) == NAMES  # each once: kept, not resent
