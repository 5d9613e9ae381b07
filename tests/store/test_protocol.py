"""The coordination protocol (docs/design.md §5), one suite run against every store."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest

from celery_hashbeat.store import BeatInfo, Store, StoreConfigError, open_store
from celery_hashbeat.store.values import Fence, RunGuard

from .conftest import Backend

LONG = 60_000  # a TTL no test outlives, for leases that must still be held when asserted
SHORT = 200  # a TTL that tests wait out: only "expired after the wait" is asserted about it
WAIT = 0.4  # comfortably past SHORT, even on a slow machine
FP = "fp1"  # a schedule fingerprint


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


def fp(slots: dict[str, int], fingerprint: str = FP) -> dict[str, tuple[int, str]]:
    """Claims of ``slots`` for one schedule fingerprint."""
    return {entry: (slot, fingerprint) for entry, slot in slots.items()}


def test_claim_takes_only_later_slots(store: Store) -> None:
    assert store.acquire("a", LONG)
    assert store.claim("a", {}) == set()
    assert store.claim("a", fp({"x": 100, "y": 200})) == {"x", "y"}
    assert store.claim("b", fp({"x": 101})) == set()  # not the lease holder
    assert store.claim("a", fp({"x": 99, "y": 150, "z": 5})) == {"z"}
    assert store.claim("a", fp({"x": 101, "y": 200})) == {"x", "y"}  # y: its own claim again
    assert store.last_slots() == {"x": 101, "y": 200, "z": 5}


def test_a_claim_is_recognised_by_its_own_beat_only(store: Store) -> None:
    """A leader whose claim reply was lost claims the same slot again and gets it; after a
    change of leader, the new one does not."""
    assert store.acquire("a", LONG)
    assert store.claim("a", fp({"x": 100})) == {"x"}
    assert store.claim("a", fp({"x": 100})) == {"x"}
    assert store.fences() == {"x": Fence(100, "a", FP)}
    assert store.release("a")
    assert store.acquire("b", LONG)
    assert store.claim("b", fp({"x": 100})) == set()
    assert store.claim("b", fp({"x": 101})) == {"x"}


def test_claim_compares_slots_as_numbers(store: Store) -> None:
    assert store.acquire("a", LONG)
    assert store.claim("a", fp({"x": 9})) == {"x"}
    assert store.claim("a", fp({"x": 10})) == {"x"}  # "10" < "9" as text
    epoch_ms = 1_767_225_600_000
    assert store.claim("a", fp({"x": epoch_ms})) == {"x"}
    assert store.claim("a", fp({"x": epoch_ms + 1})) == {"x"}
    assert store.claim("a", fp({"x": epoch_ms})) == set()
    assert store.last_slots() == {"x": epoch_ms + 1}


def test_claim_is_refused_unless_the_caller_holds_the_lease(store: Store) -> None:
    assert store.claim("a", fp({"x": 1})) == set()
    assert store.acquire("b", LONG)
    assert store.claim("a", fp({"x": 1})) == set()
    assert store.last_slots() == {}
    assert store.claim("b", fp({"x": 1})) == {"x"}


def test_claim_is_refused_to_a_holder_whose_lease_expired(store: Store) -> None:
    assert store.acquire("a", SHORT)
    assert store.claim("a", fp({"x": 1})) in ({"x"}, set())  # empty only if this box stalled
    time.sleep(WAIT)
    assert store.claim("a", fp({"x": 2, "y": 2})) == set()
    assert store.acquire("b", LONG)
    assert store.claim("a", fp({"x": 3})) == set()
    assert store.claim("b", fp({"x": 3})) == {"x"}
    assert store.last_slots(["x", "y"]) == {"x": 3}


def test_claim_many_entries_in_one_call(store: Store) -> None:
    assert store.acquire("a", LONG)
    slots = {f"entry-{i}": 1_000 + i for i in range(5_000)}
    assert store.claim("a", fp(slots)) == set(slots)
    store.release("a")
    assert store.acquire("b", LONG)
    later = {name: slot + (i % 2) for i, (name, slot) in enumerate(slots.items())}
    claimed = store.claim("b", fp(later))
    assert claimed == {name for i, name in enumerate(slots) if i % 2}
    assert store.last_slots() == later
    assert store.last_slots(["entry-1", "entry-4999", "nope"]) == {
        "entry-1": later["entry-1"],
        "entry-4999": later["entry-4999"],
    }
    assert store.unclaim("b", later) == claimed
    assert store.last_slots() == slots


def test_entry_names_are_opaque(store: Store) -> None:
    names = ["with space", "pipe|and:colon", "{braces}", "ünïcødé ✓", "", "-1", "12:3|\n4"]
    assert store.acquire("a", LONG)
    assert store.claim("a", fp(dict.fromkeys(names, 7))) == set(names)
    assert store.last_slots() == dict.fromkeys(names, 7)
    # A guarded claim and any fingerprint read back whole too.
    guards = {name: RunGuard("skip", f"task-{i}", LONG) for i, name in enumerate(names)}
    assert store.claim("a", fp(dict.fromkeys(names, 8), "f|p:2"), guards) == set(names)
    assert store.fences() == {name: Fence(8, "a", "f|p:2") for name in names}
    assert store.running() == {name: guard.task_id for name, guard in guards.items()}


def test_unclaim_restores_the_previous_fence(store: Store) -> None:
    assert store.acquire("a", LONG)
    assert store.anchor("a", {"w": (50, FP)}) == {"w": Fence(50, "", FP)}
    assert store.claim("a", fp({"x": 100})) == {"x"}
    assert store.claim("a", fp({"w": 60, "x": 200, "y": 5})) == {"w", "x", "y"}
    assert store.unclaim("a", {"w": 60, "x": 200, "y": 5}) == {"w", "x", "y"}
    # x's earlier claim is back (its claimer no longer known), w's anchor is back, y has none.
    assert store.fences() == {"w": Fence(50, "", FP), "x": Fence(100, "-", FP)}
    assert store.last_slots() == {"x": 100}
    assert store.claim("a", fp({"x": 200, "y": 5})) == {"x", "y"}


def test_unclaim_checks_the_lease_the_owner_and_the_slot(store: Store) -> None:
    assert store.acquire("a", LONG)
    store.claim("a", fp({"x": 100}))
    assert store.claim("a", fp({"x": 200})) == {"x"}
    assert store.unclaim("b", {"x": 200}) == set()
    assert store.unclaim("a", {"x": 150, "missing": 200}) == set()
    assert store.claim("a", fp({"x": 300})) == {"x"}
    assert store.unclaim("a", {"x": 200}) == set()
    assert store.last_slots() == {"x": 300}
    assert store.release("a")
    assert store.unclaim("a", {"x": 300}) == set()
    assert store.acquire("b", LONG)
    assert store.unclaim("b", {"x": 300}) == set()  # a's claim: b cannot give it back
    assert store.last_slots() == {"x": 300}


def test_anchor_keeps_a_fence_of_the_same_schedule_and_replaces_another(store: Store) -> None:
    assert store.anchor("a", {"x": (1, FP)}) == {}  # no lease, no anchor
    assert store.acquire("a", LONG)
    store.claim("a", fp({"same": 100, "other": 100}))
    anchored = store.anchor("a", {"new": (500, FP), "same": (500, FP), "other": (500, "fp2")})
    assert anchored == {
        "new": Fence(500, "", FP),
        "same": Fence(100, "a", FP),
        "other": Fence(500, "", "fp2"),
    }
    assert store.anchor("a", {"new": (900, FP)}) == {"new": Fence(500, "", FP)}
    assert store.last_slots() == {"same": 100}  # anchors are not sends
    assert store.claim("a", fp({"new": 500})) == set()  # slots count from after the anchor
    assert store.claim("a", fp({"new": 501})) == {"new"}


def test_forget_drops_the_fence_only_under_the_lease(store: Store) -> None:
    assert store.acquire("a", LONG)
    store.claim("a", fp({"x": 10, "y": 20}))
    assert not store.forget("b", ["x"])
    assert store.forget("a", ["x", "never-claimed"])
    assert store.forget("a", [])
    assert store.last_slots() == {"y": 20}
    assert store.claim("a", fp({"x": 1})) == {"x"}
    assert store.release("a")
    assert not store.forget("a", ["y"])
    assert store.last_slots() == {"x": 1, "y": 20}


def test_forget_of_nothing_still_answers_whether_the_lease_is_held(store: Store) -> None:
    assert not store.forget("a", [])
    assert store.acquire("a", LONG)
    assert store.forget("a", [])
    assert not store.forget("b", iter(()))


def test_tokens_that_would_spoil_a_fence_are_refused(store: Store) -> None:
    for token in ("", "-", "host|1"):
        with pytest.raises(ValueError, match="token"):
            store.acquire(token, LONG)
        with pytest.raises(ValueError, match="token"):
            store.claim(token, fp({"x": 1}))
    assert store.leader() is None
    assert store.fences() == {}


def test_unreadable_fences_are_logged_once_skipped_and_overwritten(
    store: Store, write_raw: Callable[[str, str], None], caplog: pytest.LogCaptureFixture
) -> None:
    """One bad value (a hand edit, a bug elsewhere) never stops the beat: fences() leaves it
    out, says so once, and the entry's next claim or anchor writes a good fence over it."""
    bad = {
        "word": "soon",
        "sign": "-5|a||fp1",
        "short": "5|a|fp1",
        "previous": "5|a|zz|fp1",
        "lone-a": "5|a|a|fp1",  # a previous of "a" names no slot
    }
    for entry, value in bad.items():
        write_raw(entry, value)
    with caplog.at_level(logging.WARNING, logger="celery_hashbeat.store"):
        assert store.fences() == {}
        assert store.fences(list(bad)) == {}
        assert store.last_slots() == {}
    for entry in bad:  # SQLite shows its row's columns joined as Redis would store them
        said = [record for record in caplog.records if f"entry {entry!r}" in record.getMessage()]
        assert len(said) == 1, entry
        assert said[0].levelname == "WARNING"
        assert "skipping" in said[0].getMessage()
    assert store.acquire("a", LONG)
    # Cannot tell what to restore: kept out.
    assert store.unclaim("a", {"previous": 5, "lone-a": 5}) == set()
    assert store.claim("a", fp({"word": 7, "sign": 7, "lone-a": 7})) == {"word", "sign", "lone-a"}
    assert store.anchor("a", {"short": (9, FP), "previous": (9, FP)}) == {
        "short": Fence(9, "", FP),
        "previous": Fence(9, "", FP),
    }
    assert store.fences() == {
        "word": Fence(7, "a", FP),
        "sign": Fence(7, "a", FP),
        "lone-a": Fence(7, "a", FP),
        "short": Fence(9, "", FP),
        "previous": Fence(9, "", FP),
    }


def test_a_bare_slot_of_release_0_1_reads_as_a_claim_by_an_unknown_beat(
    store: Store, write_raw: Callable[[str, str], None]
) -> None:
    write_raw("old", "1700000000000")
    write_raw("older", "1600000000000")
    assert store.fences() == {
        "old": Fence(1_700_000_000_000, "-", None),
        "older": Fence(1_600_000_000_000, "-", None),
    }
    assert store.last_slots() == {"old": 1_700_000_000_000, "older": 1_600_000_000_000}
    assert store.acquire("a", LONG)
    # No fingerprint recorded: any schedule's anchor keeps it.
    assert store.anchor("a", {"old": (5, FP)}) == {"old": Fence(1_700_000_000_000, "-", None)}
    assert store.claim("a", fp({"old": 1_700_000_000_000})) == set()
    assert store.claim("a", fp({"old": 1_700_000_060_000, "older": 1_600_000_060_000})) == {
        "old",
        "older",
    }
    assert store.unclaim("a", {"old": 1_700_000_060_000}) == {"old"}
    # Given back: the old slot again, with the fingerprint of the claim given back.
    assert store.fences(["old"]) == {"old": Fence(1_700_000_000_000, "-", FP)}


def test_a_fence_restored_by_a_give_back_is_nobodys_to_give_back_again(store: Store) -> None:
    assert store.acquire("a", LONG)
    assert store.claim("a", fp({"x": 100}))
    assert store.claim("a", fp({"x": 200}))
    assert store.unclaim("a", {"x": 200}) == {"x"}
    assert store.unclaim("a", {"x": 100}) == set()  # restored as "-": a cannot undo it
    assert store.claim("a", fp({"x": 100})) == set()  # nor claim it again as its own
    assert store.fences() == {"x": Fence(100, "-", FP)}


def test_a_run_count_is_kept_beside_each_fence(store: Store) -> None:
    assert store.acquire("a", LONG)
    assert store.claim("a", fp({"x": 100, "y": 100})) == {"x", "y"}
    assert store.claim("a", fp({"x": 200})) == {"x"}
    assert store.claim("a", fp({"x": 200})) == {"x"}  # its own claim again: not a new run
    assert {name: fence.runs for name, fence in store.fences().items()} == {"x": 2, "y": 1}
    assert store.unclaim("a", {"x": 200}) == {"x"}  # given back: that run did not happen
    assert store.fences(["x"])["x"].runs == 1
    assert store.anchor("a", {"x": (500, "fp2")})["x"].slot == 500  # another schedule
    assert store.fences(["x"])["x"].runs == 1  # the entry's count outlives a schedule change
    assert store.forget("a", ["x"])
    assert store.claim("a", fp({"x": 600})) == {"x"}
    assert store.fences(["x"])["x"].runs == 1  # a forgotten entry counts afresh


def test_fences_written_without_a_run_count_read_as_zero_runs(
    store: Store, write_raw: Callable[[str, str], None]
) -> None:
    write_raw("bare", "1700000000000")
    write_raw("claimed", "1700000000000|old-beat||fp1")
    fences = store.fences()
    assert {name: fence.runs for name, fence in fences.items()} == {"bare": 0, "claimed": 0}
    assert fences["claimed"] == Fence(1_700_000_000_000, "old-beat", FP)
    assert store.acquire("a", LONG)
    assert store.claim("a", fp({"claimed": 1_700_000_060_000})) == {"claimed"}
    assert store.fences(["claimed"])["claimed"].runs == 1


def test_last_slots_of_some_entries(store: Store) -> None:
    assert store.last_slots() == {}
    assert store.last_slots([]) == {}
    assert store.acquire("a", LONG)
    store.claim("a", fp({"x": 10, "y": 20}))
    assert store.last_slots(name for name in ("y", "z")) == {"y": 20}


def test_state_is_shared_by_every_store_object(store: Store, connect: Callable[..., Store]) -> None:
    assert store.acquire("a", LONG)
    store.claim("a", fp({"x": 10}))
    store.heartbeat("a", "leader", LONG)
    other = connect()
    assert not other.acquire("b", LONG)
    assert other.last_slots() == {"x": 10}
    assert [beat.token for beat in other.beats()] == ["a"]
    store.close()
    reopened = connect()
    assert reopened.claim("a", fp({"x": 11})) == {"x"}


def test_prefixes_are_separate_namespaces(
    store: Store, connect: Callable[..., Store], backend: Backend
) -> None:
    other = connect(prefix=f"{backend.prefix}-other")
    assert store.acquire("a", LONG)
    assert other.acquire("b", LONG)
    assert store.claim("a", fp({"x": 1})) == {"x"}
    assert other.claim("b", fp({"x": 1})) == {"x"}
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


def test_heartbeats_carry_the_schedule_digest_and_a_release_drops_its_beat(store: Store) -> None:
    store.heartbeat("a", "leader", LONG, "0f3a")
    store.heartbeat("b", "standby", LONG)
    assert {beat.token: beat.schedule_digest for beat in store.beats()} == {"a": "0f3a", "b": ""}
    assert store.acquire("a", LONG)
    assert not store.release("b")
    assert store.release("a")
    assert [beat.token for beat in store.beats()] == ["b"]  # a stopped beat is not listed


def test_a_schedule_digest_is_any_text_without_a_pipe(store: Store) -> None:
    """The digest is the scheduler's business: whatever it looks like, it comes back, and the
    beat that sent it stays listed when another beat's heartbeat prunes the expired ones."""
    store.heartbeat("a", "leader", LONG, "Not-Hex_ü+/=")
    store.heartbeat("b", "standby", LONG, "")
    assert {beat.token: beat.schedule_digest for beat in store.beats()} == {
        "a": "Not-Hex_ü+/=",
        "b": "",
    }
    with pytest.raises(ValueError, match="digest"):
        store.heartbeat("c", "standby", LONG, "a|b")
    assert {beat.token for beat in store.beats()} == {"a", "b"}


def test_ping_answers(store: Store) -> None:
    store.ping()


@pytest.mark.parametrize("prefix", ["", "a{b", "x}"])
def test_unusable_prefix_is_a_config_error(backend: Backend, prefix: str) -> None:
    with pytest.raises(StoreConfigError, match="hashbeat_key_prefix"):
        open_store(backend.url, prefix)
