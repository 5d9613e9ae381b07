"""The beat's side of overlap guards (docs/design.md §12): in-process schedulers against the real
Redis (store and broker) on a clock the tests move. The run lease is held and released here
through the store, as a worker would; tests/worker runs real workers. The beat's side of
per-worker copies (§11) is in test_per_worker_copies.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.publish.message import slot_task_id
from celery_hashbeat.store import Store, open_store
from tests.support.beat_fixtures import START, Broker, Clock, Make, drain, iso, ticks

EVERY_SECOND = "* * * * * *"


@pytest.fixture
def store(app: Celery) -> Iterator[Store]:
    opened = open_store(app.conf.hashbeat_store_url, app.conf.hashbeat_key_prefix)
    yield opened
    opened.close()


def guarded(app: Celery, overlap: str) -> None:
    app.conf.beat_schedule = {
        "job": {"task": "t", "schedule": hashcron(EVERY_SECOND), "overlap": overlap}
    }


def second(clock: Clock, beat: object) -> None:
    clock.advance(1)
    drain(beat)  # type: ignore[arg-type]


def test_skip_fences_the_slot_and_sends_nothing_while_a_run_holds_the_lease(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, store: Store
) -> None:
    guarded(app, "skip")
    beat = schedulers(clock)
    ticks(beat)
    second(clock, beat)  # START + 1000 is sent and takes the run lease
    first = slot_task_id("job", START + 1000)
    assert store.running(["job"]) == {"job": first}
    headers = broker.new()
    assert [h["hashbeat_slot"] for h in headers] == [iso(START + 1000)]
    assert headers[0]["hashbeat_run_ttl"] == 60  # hashbeat_running_ttl, in seconds

    second(clock, beat)
    second(clock, beat)
    assert broker.new() == []
    assert store.last_slots(["job"]) == {"job": START + 3000}  # skipped, not retried later
    assert store.release_run("job", first)  # the run ends
    second(clock, beat)
    assert [h["hashbeat_slot"] for h in broker.new()] == [iso(START + 4000)]


def test_buffer_one_sends_only_the_newest_waiting_slot_once_the_run_ends(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, store: Store
) -> None:
    guarded(app, "buffer_one")
    beat = schedulers(clock)
    ticks(beat)
    second(clock, beat)
    first = slot_task_id("job", START + 1000)
    broker.new()
    for _ in range(3):
        second(clock, beat)
    assert broker.new() == []
    assert store.last_slots(["job"]) == {"job": START + 1000}  # waiting slots stay unclaimed
    store.release_run("job", first)
    clock.advance(0.3)  # the waiting slot asks again every WAIT_POLL_MS
    drain(beat)
    assert [h["hashbeat_slot"] for h in broker.new()] == [iso(START + 4000)]
    assert store.running(["job"]) == {"job": slot_task_id("job", START + 4000)}


def test_replace_revokes_the_holder_and_sends_the_slot(
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    store: Store,
    caplog: pytest.LogCaptureFixture,
) -> None:
    guarded(app, "replace")
    beat = schedulers(clock)
    ticks(beat)
    second(clock, beat)
    first = slot_task_id("job", START + 1000)
    with caplog.at_level(logging.INFO, logger="celery_hashbeat"):
        second(clock, beat)
    assert [h["hashbeat_slot"] for h in broker.new()] == [iso(START + 1000), iso(START + 2000)]
    assert store.running(["job"]) == {"job": slot_task_id("job", START + 2000)}
    revoked = [r.getMessage() for r in caplog.records if "revoking" in r.getMessage()]
    assert revoked == [f"beat: job slot {iso(START + 2000)} replaces its run {first}: revoking it"]


def test_allow_takes_no_run_lease_and_sends_no_ttl(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, store: Store
) -> None:
    guarded(app, "allow")
    beat = schedulers(clock)
    ticks(beat)
    second(clock, beat)
    second(clock, beat)
    headers = broker.new()
    assert len(headers) == 2
    assert all("hashbeat_run_ttl" not in h for h in headers)
    assert store.running() == {}


def test_a_guarded_entry_on_an_sqlite_store_warns_once_at_start(
    app: Celery, schedulers: Make, tmp_path: object, caplog: pytest.LogCaptureFixture
) -> None:
    guarded(app, "skip")
    app.conf.hashbeat_store_url = f"sqlite:///{tmp_path}/store.sqlite"
    with caplog.at_level(logging.WARNING, logger="celery_hashbeat"):
        schedulers()
    warned = [r.getMessage() for r in caplog.records if "SQLite" in r.getMessage()]
    assert len(warned) == 1, warned
    assert "1 entry with an overlap guard (job)" in warned[0]
    assert "use a Redis store" in warned[0]


def test_no_warning_on_a_redis_store(
    app: Celery, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    guarded(app, "skip")
    with caplog.at_level(logging.WARNING, logger="celery_hashbeat"):
        schedulers()
    assert not [r for r in caplog.records if "run lease" in r.getMessage()]
