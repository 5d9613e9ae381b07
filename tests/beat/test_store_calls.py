"""The one way a beat calls its store (beat/storecalls.py), and the owners of the beat's state.

The store is a real redis-server of the test's own, frozen with SIGSTOP or killed.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

import pytest
from celery import beat

import celery_hashbeat
from celery_hashbeat import Scheduler
from celery_hashbeat.beat.storecalls import FAILED, StoreCalls
from celery_hashbeat.store import RedisStore, StoreError, StoreUnavailable
from tests.support.redis_server import RedisProcess

PACKAGE = Path(celery_hashbeat.__file__).parent


@pytest.fixture
def server() -> object:
    with RedisProcess() as process:
        yield process


def calls_on(store: RedisStore, give_up_after_s: float) -> tuple[StoreCalls, list[BaseException]]:
    failures: list[BaseException] = []
    deadline = time.monotonic() + give_up_after_s
    calls = StoreCalls(lambda: time.monotonic() >= deadline, lambda exc, _: failures.append(exc))
    calls.open(store)
    return calls, failures


def test_a_call_to_a_frozen_store_ends_when_the_beat_stops_waiting(server: RedisProcess) -> None:
    # The socket would wait 60 s; the beat stops waiting after half a second.
    store = RedisStore(server.url, "calls", socket_timeout=60)
    calls, failures = calls_on(store, give_up_after_s=0.5)
    assert calls.call(calls.store.leader) is None  # answers while it runs
    server.pause()
    try:
        began = time.monotonic()
        with pytest.raises(StoreUnavailable, match="leader"):
            calls.call(calls.store.leader)
        assert time.monotonic() - began < 30
        assert failures == []  # call() leaves the failure to its caller
    finally:
        server.resume()
        calls.close()


def test_a_failed_attempt_is_told_to_the_lease_once_and_returns_failed(
    server: RedisProcess,
) -> None:
    store = RedisStore(server.url, "calls", socket_timeout=1)
    calls, failures = calls_on(store, give_up_after_s=60)
    assert calls.attempt(calls.store.share, "me", "balance", "{}") is False  # not the leader
    server.kill()
    try:
        assert calls.attempt(calls.store.share, "me", "balance", "{}") is FAILED
        assert len(failures) == 1
        assert isinstance(failures[0], StoreError)
    finally:
        calls.close()


def test_calls_before_the_store_is_open_fail_as_an_outage() -> None:
    failures: list[BaseException] = []
    calls = StoreCalls(lambda: False, lambda exc, _: failures.append(exc))
    assert not calls.opened
    with pytest.raises(StoreUnavailable, match="not open"):
        calls.store  # noqa: B018 - the property raises
    calls.close()


def test_the_scheduler_is_celerys_scheduler_with_no_mixins() -> None:
    assert Scheduler.__bases__ == (beat.Scheduler,)


MUTATORS = frozenset(
    {"update", "pop", "clear", "add", "discard", "setdefault", "append", "difference_update"}
)


def writers_of(name: str) -> set[str]:
    """The package's modules that change an attribute called ``name``: assign it, assign or
    delete an item of it, or call one of its mutating methods."""

    def writes(node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == name:
            return isinstance(node.ctx, (ast.Store, ast.Del))
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            return isinstance(node.value, ast.Attribute) and node.value.attr == name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            held = node.func.value
            return (
                node.func.attr in MUTATORS
                and isinstance(held, ast.Attribute)
                and (held.attr == name)
            )
        return False

    users = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        if any(writes(node) for node in ast.walk(tree)):
            users.add(path.relative_to(PACKAGE).as_posix())
    return users


@pytest.mark.parametrize(
    ("state", "owner"),
    [
        ("owed_slots", "beat/handover.py"),  # claimed slots not yet sent
        ("_published", "beat/dispatch.py"),  # slots being published
        ("_parked", "beat/parking.py"),  # paused entries off the queue
        ("_balance_shared", "beat/leadership.py"),
        ("outage", "publish/publisher.py"),  # the broker's
    ],
)
def test_each_piece_of_in_flight_state_is_changed_in_one_module(state: str, owner: str) -> None:
    assert writers_of(state) == {owner}
