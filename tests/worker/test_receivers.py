"""The worker's side listens to Celery through one set of receivers, with one received-task map
that serves the run leases and the history alike."""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from billiard.exceptions import WorkerLostError
from celery import Celery
from celery.signals import task_failure, task_postrun, task_prerun, task_received, task_revoked
from celery.utils.dispatch.signal import Signal

from celery_hashbeat.observe.history import decode
from celery_hashbeat.publish.message import ENTRY_HEADER, RUN_TTL_HEADER, SLOT_HEADER, slot_iso
from celery_hashbeat.store import open_store
from celery_hashbeat.store.base import Store
from celery_hashbeat.worker import signals
from tests.support.processes import wait_until

TASK_SIGNALS = [task_received, task_prerun, task_postrun, task_failure, task_revoked]
SLOT_MS = 1_900_000_000_000
NODE = "w1@receivers"


def ours(signal: Signal) -> list[str]:
    """The celery_hashbeat receivers connected to ``signal``, by module and name."""
    found = []
    for _, receiver in signal.receivers:
        function = receiver() if isinstance(receiver, weakref.ReferenceType) else receiver
        module = getattr(function, "__module__", "") or ""
        if module.startswith("celery_hashbeat"):
            found.append(f"{module}.{function.__name__}")
    return found


@pytest.mark.parametrize("signal", TASK_SIGNALS, ids=lambda s: s.name)
def test_each_task_signal_has_one_hashbeat_receiver_in_the_signals_module(signal: Signal) -> None:
    receivers = ours(signal)
    assert len(receivers) == 1, receivers
    assert receivers[0].startswith("celery_hashbeat.worker.signals.")


class Request:
    """What ``task_received`` hands its receivers: the message's request dict, id and node."""

    def __init__(self, task_id: str, headers: dict[str, Any]) -> None:
        self.id = task_id
        self.hostname = NODE
        self.request_dict = headers


@pytest.fixture
def app(tmp_path: Path) -> Celery:
    return Celery(
        "receivers",
        set_as_current=False,
        config_source={
            "hashbeat_store_url": f"sqlite:///{tmp_path / 'store.db'}",
            "hashbeat_key_prefix": "receivers",
        },
    )


@pytest.fixture
def store(app: Celery) -> Iterator[Store]:
    opened = open_store(app.conf.hashbeat_store_url, prefix=app.conf.hashbeat_key_prefix)
    yield opened
    opened.close()


def lost_records(store: Store, entry: str) -> list[tuple[str, str, str]]:
    records = [decode(text) for text in store.history(entry)]
    return [(r.outcome, r.task_id, r.reason) for r in records if r is not None]


def test_a_lost_guarded_slot_task_frees_its_lease_and_is_recorded_from_one_remembered_message(
    app: Celery, store: Store
) -> None:
    @app.task(name="receivers.job")
    def job() -> None:
        """The slot's task: only its app matters here."""

    task_id = f"lost-{time.monotonic_ns()}"
    assert store.hold_run("job", task_id, 60_000)  # as the beat does when it claims the slot
    headers = {ENTRY_HEADER: "job", SLOT_HEADER: slot_iso(SLOT_MS), RUN_TTL_HEADER: 60}
    before = len(signals.received)

    task_received.send(sender=None, request=Request(task_id, headers))
    assert len(signals.received) == before + 1  # one entry, for the lease and the history
    task_failure.send(sender=job, task_id=task_id, exception=WorkerLostError("gone"))

    assert len(signals.received) == before
    assert wait_until(lambda: "job" not in store.running(["job"]), 10, 0.05)
    assert wait_until(lambda: lost_records(store, "job"), 10, 0.05)
    assert lost_records(store, "job") == [("failed", task_id, "worker lost")]
    slots = [r.slot for r in map(decode, store.history("job")) if r is not None]
    assert slots == [SLOT_MS]


def test_a_task_without_hashbeat_headers_is_not_remembered() -> None:
    before = len(signals.received)
    task_received.send(sender=None, request=Request("plain", {"id": "plain"}))
    assert len(signals.received) == before
