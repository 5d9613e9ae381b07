"""Run leases, the worker roster and shared documents (docs/design.md §11-12, §16), against both
stores."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from celery_hashbeat.store import Store
from celery_hashbeat.store.values import Roster, RunGuard

LONG = 60_000
SHORT = 200
WAIT = 0.4


def slots(**given: int) -> dict[str, tuple[int, str]]:
    return {entry: (slot, "fp") for entry, slot in given.items()}


@pytest.fixture
def leader(store: Store) -> Store:
    assert store.acquire("a", LONG)
    return store


def test_a_guarded_claim_takes_the_run_lease_with_the_fence(leader: Store) -> None:
    claimed = leader.claim("a", slots(x=10, y=10), {"x": RunGuard("skip", "task-10", LONG)})
    assert claimed == {"x", "y"}
    assert claimed.held == {}
    assert leader.running() == {"x": "task-10"}


def test_skip_claims_the_slot_and_leaves_the_holders_lease(leader: Store) -> None:
    leader.claim("a", slots(x=10), {"x": RunGuard("skip", "task-10", LONG)})
    claimed = leader.claim("a", slots(x=20), {"x": RunGuard("skip", "task-20", LONG)})
    assert claimed == {"x"}
    assert claimed.held == {"x": "task-10"}
    assert leader.running(["x"]) == {"x": "task-10"}
    assert leader.fences()["x"].slot == 20


def test_buffer_one_claims_nothing_while_the_run_lease_is_held(leader: Store) -> None:
    leader.claim("a", slots(x=10), {"x": RunGuard("buffer_one", "task-10", LONG)})
    claimed = leader.claim("a", slots(x=20), {"x": RunGuard("buffer_one", "task-20", LONG)})
    assert claimed == set()
    assert claimed.held == {"x": "task-10"}
    assert leader.fences()["x"].slot == 10
    assert leader.release_run("x", "task-10")
    claimed = leader.claim("a", slots(x=20), {"x": RunGuard("buffer_one", "task-20", LONG)})
    assert claimed == {"x"}
    assert claimed.held == {}
    assert leader.running() == {"x": "task-20"}


def test_replace_claims_the_slot_takes_the_lease_and_names_the_old_task(leader: Store) -> None:
    leader.claim("a", slots(x=10), {"x": RunGuard("replace", "task-10", LONG)})
    claimed = leader.claim("a", slots(x=20), {"x": RunGuard("replace", "task-20", LONG)})
    assert claimed == {"x"}
    assert claimed.held == {"x": "task-10"}
    assert leader.running() == {"x": "task-20"}
    assert not leader.release_run("x", "task-10"), "the revoked run must spare its successor"
    assert leader.running() == {"x": "task-20"}


def test_a_retried_claim_recognises_its_own_run_lease(leader: Store) -> None:
    guard = {"x": RunGuard("skip", "task-10", LONG)}
    assert leader.claim("a", slots(x=10), guard) == {"x"}
    again = leader.claim("a", slots(x=10), guard)
    assert again == {"x"}
    assert again.held == {}


def test_a_claim_without_the_lease_takes_no_run_lease(connect: Callable[..., Store]) -> None:
    store = connect()
    assert store.acquire("a", LONG)
    assert store.claim("b", slots(x=10), {"x": RunGuard("skip", "t", LONG)}) == set()
    assert store.running() == {}


def test_a_run_lease_lapses_after_its_ttl(leader: Store) -> None:
    leader.claim("a", slots(x=10), {"x": RunGuard("skip", "task-10", SHORT)})
    time.sleep(WAIT)
    assert leader.running() == {}
    claimed = leader.claim("a", slots(x=20), {"x": RunGuard("skip", "task-20", LONG)})
    assert claimed.held == {}


def test_the_worker_takes_renews_and_releases_owner_checked(leader: Store) -> None:
    leader.claim("a", slots(x=10), {"x": RunGuard("skip", "task-10", SHORT)})
    assert leader.hold_run("x", "task-10", SHORT)
    assert not leader.hold_run("x", "someone-else", LONG)
    for _ in range(3):  # renewed past several of its TTLs
        time.sleep(SHORT / 2000)
        assert leader.renew_runs({"x": "task-10", "y": "task-y"}, SHORT) == {"x"}
    assert leader.running() == {"x": "task-10"}
    assert not leader.release_run("x", "someone-else")
    assert leader.release_run("x", "task-10")
    assert leader.running() == {}
    assert leader.hold_run("x", "task-late", LONG), "a free lease is taken by a starting run"


def test_a_give_back_drops_the_run_lease_its_task_holds(leader: Store) -> None:
    leader.claim("a", slots(x=10, y=10), {"x": RunGuard("skip", "task-10", LONG)})
    assert leader.unclaim("a", {"x": 10}, {"x": "task-10"}) == {"x"}
    assert leader.running() == {}
    assert "x" not in leader.fences()


def test_the_roster_is_written_under_the_lease_and_read_by_anyone(
    connect: Callable[..., Store],
) -> None:
    first, second = connect(), connect()
    assert first.roster() is None
    assert first.acquire("a", LONG)
    assert not second.set_roster("b", ["celery@x"], 5)
    assert first.set_roster("a", ["celery@w2", "celery@w1", "celery@w1"], 7)
    assert second.roster() == Roster(("celery@w1", "celery@w2"), 7)
    assert first.set_roster("a", [], 9)
    assert second.roster() == Roster((), 9)


def test_a_bad_guard_is_the_callers_bug(leader: Store) -> None:
    with pytest.raises(ValueError, match="run guard"):
        leader.claim("a", slots(x=1), {"x": RunGuard("allow", "t", LONG)})
    with pytest.raises(ValueError, match="TTL"):
        leader.claim("a", slots(x=1), {"x": RunGuard("skip", "t", 0)})


def test_shared_documents_are_written_under_the_lease_and_kept_apart(
    connect: Callable[..., Store],
) -> None:
    first, second = connect(), connect()
    assert first.shared("balance") is None
    assert first.acquire("a", LONG)
    assert not second.share("b", "balance", '{"x": [1]}')
    assert first.share("a", "balance", '{"x": [2]}')
    assert first.set_roster("a", ["celery@w1"], 3)
    assert second.shared("balance") == '{"x": [2]}'
    assert second.roster() == Roster(("celery@w1",), 3)


def test_an_unreadable_roster_reads_as_none(connect: Callable[..., Store]) -> None:
    store = connect()
    assert store.acquire("a", LONG)
    assert store.share("a", "roster", "not a roster")
    assert store.roster() is None
