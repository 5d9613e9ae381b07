"""A beat killed with SIGKILL a moment after it sent a slot (or an operator's triggered run)
still leaves that send's record in the store (docs/design.md §14): a real ``celery beat``
process on a real Redis."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from celery_hashbeat.control.pause_and_trigger import Trigger, encode_trigger
from celery_hashbeat.observe.history import SENT, TRIGGER, newest_first
from celery_hashbeat.publish.message import slot_iso
from celery_hashbeat.store import open_store
from tests.observe.beats import Beats
from tests.support.processes import ProcessGroup, wait_until
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.slow

SENDING = re.compile(r"Sending due task sparse \(\S+\) slot (\S+)")


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path) as group:
        yield group


def test_the_last_sent_record_survives_a_sigkill(
    processes: ProcessGroup, private_redis: RedisProcess
) -> None:
    # A long lease: the next renewal, which would carry the record too, is ten seconds off.
    beats = Beats(processes, private_redis.url, broker_url=private_redis.url, schedule="sparse",
                  ttl=30.0)  # fmt: skip
    beat = beats.start()
    sent: list[str] = []

    def first_send() -> bool:
        sent.extend(SENDING.findall(beat.process.log.read_text(errors="replace")))
        return bool(sent)

    assert wait_until(first_send, 20, 0.05), beats.logs()
    time.sleep(0.5)  # the next slot (and the claim that would carry it) is 4.5 s away
    beat.process.kill()
    store = open_store(private_redis.url, beats.prefix)
    try:
        history = newest_first(store.history("sparse"))
    finally:
        store.close()
    recorded = [slot_iso(r.slot) for r in history if r.outcome == SENT and r.slot is not None]
    assert sent[0] in recorded, (sent, history, beats.logs())


def test_a_triggered_runs_record_survives_a_sigkill(
    processes: ProcessGroup, private_redis: RedisProcess
) -> None:
    beats = Beats(processes, private_redis.url, broker_url=private_redis.url, schedule="sparse",
                  ttl=30.0)  # fmt: skip
    beat = beats.start()
    store = open_store(private_redis.url, beats.prefix)
    try:
        assert wait_until(lambda: store.leader() is not None, 20, 0.05), beats.logs()
        task_id = str(uuid.uuid4())
        store.ask(encode_trigger(Trigger("sparse", task_id, int(time.time() * 1000))))
        log = beat.process.log
        assert wait_until(lambda: "Sending triggered task sparse" in log.read_text(), 20, 0.05)
        time.sleep(0.3)
        beat.process.kill()
        history = newest_first(store.history("sparse"))
    finally:
        store.close()
    assert [r.task_id for r in history if r.outcome == TRIGGER] == [task_id], beats.logs()
