"""The lease when the store goes away: a Redis of the test's own, paused or killed in real time."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from celery import Celery

from celery_hashbeat import Scheduler, hashinterval
from tests.support.beat_fixtures import Broker, run_for
from tests.support.redis_server import RedisProcess

Make = Callable[..., Scheduler]


def messages(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


@pytest.fixture
def beat(app: Celery, private_redis: RedisProcess, schedulers: Make) -> Scheduler:
    """A beat whose store is the private Redis (the broker stays on the shared one)."""
    app.conf.hashbeat_store_url = private_redis.url
    app.conf.hashbeat_lease_ttl = 1.5  # renewed every 0.5 s; store calls time out after 0.5 s
    app.conf.beat_schedule = {"often": {"task": "t", "schedule": hashinterval(0.2)}}
    return schedulers()


def test_a_paused_store_makes_the_leader_step_down_until_it_answers(
    beat: Scheduler, broker: Broker, private_redis: RedisProcess, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="celery_hashbeat"):
        run_for(beat, 1.0)
        assert beat.is_leader and broker.new()

        private_redis.pause()
        run_for(beat, 2.0)
        assert not beat.is_leader
        assert broker.new() == []  # nothing is enqueued while the store does not answer
        assert len(messages(caplog, "unreachable")) == 1  # one line per outage, not per tick

        private_redis.resume()
        run_for(beat, 6.0, until=lambda: beat.is_leader)
        assert beat.is_leader
        run_for(beat, 0.6)
        assert broker.new()
    assert len(messages(caplog, "answers again")) == 1
    assert len(messages(caplog, "acquired the lease")) == 2  # once at start, once on recovery


def test_a_killed_store_is_survived_and_a_restarted_one_rejoined(
    beat: Scheduler, broker: Broker, private_redis: RedisProcess, caplog: pytest.LogCaptureFixture
) -> None:
    run_for(beat, 0.6)
    assert beat.is_leader and broker.new()
    with caplog.at_level(logging.INFO, logger="celery_hashbeat"):
        private_redis.kill()
        run_for(beat, 1.0)
        assert not beat.is_leader and broker.new() == []
        private_redis.start()
        run_for(beat, 6.0, until=lambda: beat.is_leader)
        assert beat.is_leader
    assert len(messages(caplog, "unreachable")) == 1
    assert len(messages(caplog, "answers again")) == 1


def test_beats_on_one_sqlite_file_elect_one_leader(
    app: Celery, broker: Broker, schedulers: Make, tmp_path: Path
) -> None:
    app.conf.hashbeat_store_url = f"sqlite:///{tmp_path}/beat.sqlite"
    app.conf.beat_schedule = {"often": {"task": "t", "schedule": hashinterval(0.1)}}
    first, second = schedulers(), schedulers()
    for _ in range(20):
        run_for(first, 0.02)
        run_for(second, 0.02)
    assert first.is_leader != second.is_leader
    ids = [headers["id"] for headers in broker.headers()]
    assert ids and len(ids) == len(set(ids))
