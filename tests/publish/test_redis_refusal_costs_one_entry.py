"""On a Redis broker, an entry whose queue the broker refuses (its key holds something that is not
a list: ``WRONGTYPE``) costs that entry's slots alone: each is dropped with one line and recorded
as dropped, and the other entries' slots go out on time, in the same chunk and in the chunks after
it (docs/design.md §10, §17)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import redis
from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.observe.history import decode
from tests.support.beat_fixtures import Clock, Make
from tests.support.redis_server import RedisProcess

GOOD = [f"good-{i}" for i in range(5)]


@pytest.fixture
def broker(private_redis: RedisProcess) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(private_redis.url)
    client.set("not-a-list", "an operator's stray string")
    yield client
    client.close()


def test_a_refused_message_is_dropped_and_the_others_go_on(
    app: Celery,
    private_redis: RedisProcess,
    broker: redis.Redis,
    schedulers: Make,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app.conf.update(
        broker_url=private_redis.url,
        task_default_queue="good",
        beat_schedule={
            "bad": {
                "task": "shop.tick",
                "schedule": hashcron("* * * * *"),
                "options": {"queue": "not-a-list"},
            },
            **{name: {"task": "shop.tick", "schedule": hashcron("* * * * *")} for name in GOOD},
        },
    )
    # Chunks of two: the refused message shares a chunk with a good one, and more follow.
    monkeypatch.setattr("celery_hashbeat.publish.publisher.CHUNK", 2)
    beat = schedulers(clock)
    beat.tick()
    assert beat.is_leader
    for minute in (1, 2):
        clock.advance(60)
        with caplog.at_level(logging.ERROR):
            beat.tick()
        arrived = [
            json.loads(raw)["headers"]["hashbeat_entry"] for raw in broker.lrange("good", 0, -1)
        ]
        assert sorted(arrived) == sorted(GOOD * minute), f"minute {minute}: {arrived}"
    assert broker.type("not-a-list") == b"string"
    refused = [r for r in caplog.records if "bad" in r.getMessage() and "dropped" in r.getMessage()]
    assert len(refused) == 2, [r.getMessage() for r in caplog.records]
    assert "WRONGTYPE" in refused[0].getMessage()
    beat.close()  # writes the history waiting
    history = [decode(text) for text in beat.store_calls.store.history("bad")]
    assert [record.outcome for record in history if record] == ["dropped", "dropped"]
