"""The coordination protocol (DESIGN.md §5), one suite run against every store."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from celery_hashbeat.store import BeatInfo, Store, StoreConfigError, open_store

from .conftest import Backend

LONG = 60_000  # a TTL no test outlives, for leases that must still be held when asserted
SHORT = 200  # a TTL that tests wait out: only "expired after the wait" is asserted about it
WAIT = 0.4  # comfortably past SHORT, even on a slow machine


def test_acquire_is_exclusive_and_release_frees_it(store: Store) -> None:
    assert store.leader() is None
    assert store.acquire("a", LONG)
    assert not store.acquire("b", LONG)
    lease = store.leader()
    assert lease is not None
    assert lease.token == "a"
    assert 0 < lease.ttl_left_ms <= LONG
    assert not store.release("b")
    assert store.leader() is not None
    assert store.release("a")
    assert store.leader() is None
    assert not store.release("a")
    assert store.acquire("b", LONG)


def test_acquire_again_by_the_holder_keeps_the_lease_unextended(store: Store) -> None:
    assert store.acquire("a", 5_000)
    assert store.acquire("a", LONG)
    lease = store.leader()
    assert lease is not None
    assert lease.ttl_left_ms <= 5_000


def test_renew_extends_only_the_holders_lease(store: Store) -> None:
    assert store.acquire("a", 5_000)
    assert not store.renew("b", LONG)
    assert store.renew("a", LONG)
    lease = store.leader()
    assert lease is not None
    assert lease.token == "a"
    assert lease.ttl_left_ms > 5_000


def test_lease_expires_after_its_ttl(store: Store) -> None:
    assert store.acquire("a", SHORT)
    time.sleep(WAIT)
    assert store.leader() is None
    assert not store.renew("a", LONG)
    assert not store.release("a")
    assert store.acquire("b", LONG)
    lease = store.leader()
    assert lease is not None
    assert lease.token == "b"


def test_ttl_must_be_positive(store: Store) -> None:
    with pytest.raises(ValueError, match="TTL"):
        store.acquire("a", 0)
    with pytest.raises(ValueError, match="TTL"):
        store.renew("a", -1)
    with pytest.raises(ValueError, match="TTL"):
        store.heartbeat("a", "standby", 0)
    assert store.leader() is None


def test_claim_takes_only_later_slots(store: Store) -> None:
    assert store.acquire("a", LONG)
    assert store.claim("a", {}) == {}
    assert store.claim("a", {"x": 100, "y": 200}) == {"x": None, "y": None}
    assert store.claim("a", {"x": 100, "y": 150, "z": 5}) == {"z": None}
    assert store.claim("a", {"x": 101, "y": 200}) == {"x": 100}
    assert store.last_slots() == {"x": 101, "y": 200, "z": 5}


def test_claim_compares_slots_as_numbers(store: Store) -> None:
    assert store.acquire("a", LONG)
    assert store.claim("a", {"x": 9}) == {"x": None}
    assert store.claim("a", {"x": 10}) == {"x": 9}  # "10" < "9" as text
    epoch_ms = 1_767_225_600_000
    assert store.claim("a", {"x": epoch_ms}) == {"x": 10}
    assert store.claim("a", {"x": epoch_ms + 1}) == {"x": epoch_ms}
    assert store.claim("a", {"x": epoch_ms}) == {}
    assert store.last_slots() == {"x": epoch_ms + 1}


def test_claim_is_refused_unless_the_caller_holds_the_lease(store: Store) -> None:
    assert store.claim("a", {"x": 1}) == {}
    assert store.acquire("b", LONG)
    assert store.claim("a", {"x": 1}) == {}
    assert store.last_slots() == {}
    assert store.claim("b", {"x": 1}) == {"x": None}


def test_claim_is_refused_to_a_holder_whose_lease_expired(store: Store) -> None:
    assert store.acquire("a", SHORT)
    assert store.claim("a", {"x": 1}) in ({"x": None}, {})  # {} only if this box stalled
    time.sleep(WAIT)
    assert store.claim("a", {"x": 2, "y": 2}) == {}
    assert store.acquire("b", LONG)
    assert store.claim("a", {"x": 3}) == {}
    assert store.claim("b", {"x": 3})["x"] in (1, None)
    assert store.last_slots(["x", "y"]) == {"x": 3}


def test_claim_many_entries_in_one_call(store: Store) -> None:
    assert store.acquire("a", LONG)
    slots = {f"entry-{i}": 1_000 + i for i in range(5_000)}
    assert store.claim("a", slots) == dict.fromkeys(slots)
    later = {name: slot + (i % 2) for i, (name, slot) in enumerate(slots.items())}
    claimed = store.claim("a", later)
    assert claimed == {name: slots[name] for i, name in enumerate(slots) if i % 2}
    assert store.last_slots() == later
    assert store.last_slots(["entry-1", "entry-4999", "nope"]) == {
        "entry-1": later["entry-1"],
        "entry-4999": later["entry-4999"],
    }


def test_entry_names_are_opaque(store: Store) -> None:
    names = ["with space", "pipe|and:colon", "{braces}", "ünïcødé ✓", "", "-1"]
    assert store.acquire("a", LONG)
    assert store.claim("a", dict.fromkeys(names, 7)) == dict.fromkeys(names)
    assert store.last_slots() == dict.fromkeys(names, 7)


def test_unclaim_restores_the_previous_slot(store: Store) -> None:
    assert store.acquire("a", LONG)
    assert store.claim("a", {"x": 100}) == {"x": None}
    assert store.claim("a", {"x": 200, "y": 5}) == {"x": 100, "y": None}
    assert store.unclaim("a", "x", 200, 100)
    assert store.unclaim("a", "y", 5, None)
    assert store.last_slots() == {"x": 100}
    assert store.claim("a", {"x": 200, "y": 5}) == {"x": 100, "y": None}


def test_unclaim_checks_the_owner_and_the_value(store: Store) -> None:
    assert store.acquire("a", LONG)
    store.claim("a", {"x": 100})
    assert store.claim("a", {"x": 200}) == {"x": 100}
    assert not store.unclaim("b", "x", 200, 100)
    assert not store.unclaim("a", "x", 150, 100)
    assert not store.unclaim("a", "missing", 200, None)
    assert store.claim("a", {"x": 300}) == {"x": 200}
    assert not store.unclaim("a", "x", 200, 100)
    assert store.last_slots() == {"x": 300}
    assert store.release("a")
    assert not store.unclaim("a", "x", 300, 200)
    assert store.last_slots() == {"x": 300}


def test_forget_drops_the_fence(store: Store) -> None:
    assert store.acquire("a", LONG)
    store.claim("a", {"x": 10, "y": 20})
    store.forget(["x", "never-claimed"])
    store.forget([])
    assert store.last_slots() == {"y": 20}
    assert store.claim("a", {"x": 1}) == {"x": None}


def test_last_slots_of_some_entries(store: Store) -> None:
    assert store.last_slots() == {}
    assert store.last_slots([]) == {}
    assert store.acquire("a", LONG)
    store.claim("a", {"x": 10, "y": 20})
    assert store.last_slots(name for name in ("y", "z")) == {"y": 20}


def test_state_is_shared_by_every_store_object(store: Store, connect: Callable[..., Store]) -> None:
    assert store.acquire("a", LONG)
    store.claim("a", {"x": 10})
    store.heartbeat("a", "leader", LONG)
    other = connect()
    assert not other.acquire("b", LONG)
    assert other.last_slots() == {"x": 10}
    assert [beat.token for beat in other.beats()] == ["a"]
    store.close()
    reopened = connect()
    assert reopened.claim("a", {"x": 11}) == {"x": 10}


def test_prefixes_are_separate_namespaces(
    store: Store, connect: Callable[..., Store], backend: Backend
) -> None:
    other = connect(prefix=f"{backend.prefix}-other")
    assert store.acquire("a", LONG)
    assert other.acquire("b", LONG)
    assert store.claim("a", {"x": 1}) == {"x": None}
    assert other.claim("b", {"x": 1}) == {"x": None}
    other.heartbeat("b", "leader", LONG)
    assert store.beats() == []


def test_heartbeats_list_beats_most_recent_first(store: Store) -> None:
    before = time.time() * 1000
    store.heartbeat("a", "leader", LONG)
    store.heartbeat("b", "standby", LONG)
    time.sleep(0.01)
    store.heartbeat("a", "standby", LONG)
    beats = store.beats()
    assert [(beat.token, beat.role) for beat in beats] == [("a", "standby"), ("b", "standby")]
    assert beats[0].last_seen_ms > beats[1].last_seen_ms
    # Redis stamps by its own clock: the same host's here, so close to ours.
    assert all(abs(beat.last_seen_ms - before) < 5_000 for beat in beats)


def test_heartbeats_expire_after_their_ttl(store: Store) -> None:
    store.heartbeat("gone", "standby", SHORT)
    store.heartbeat("here", "leader|with a pipe", LONG)
    time.sleep(WAIT)
    assert [(beat.token, beat.role) for beat in store.beats()] == [("here", "leader|with a pipe")]
    store.heartbeat("late", "standby", LONG)
    assert {beat.token for beat in store.beats()} == {"here", "late"}
    assert all(isinstance(beat, BeatInfo) for beat in store.beats())


def test_ping_answers(store: Store) -> None:
    store.ping()


@pytest.mark.parametrize("prefix", ["", "a{b", "x}"])
def test_unusable_prefix_is_a_config_error(backend: Backend, prefix: str) -> None:
    with pytest.raises(StoreConfigError, match="hashbeat_key_prefix"):
        open_store(backend.url, prefix)
