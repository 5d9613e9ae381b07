"""Handing over claimed slots that were not sent (docs/design.md §5), on every store.

A beat that claimed a slot and surely did not send it, and can no longer give it back (it lost
its lease), hands it over; whichever beat leads takes it and sends it. The store accepts a
hand-over only for a claim it can show was the caller's, and only once.
"""

from __future__ import annotations

import pytest

from celery_hashbeat.store import Store
from celery_hashbeat.store.values import Fence

LONG = 60_000
FP = "fp1"


def claims(slots: dict[str, int]) -> dict[str, tuple[int, str]]:
    return {entry: (slot, FP) for entry, slot in slots.items()}


def test_a_deposed_claimer_hands_over_its_claim_and_the_leader_takes_it_once(
    store: Store,
) -> None:
    assert store.acquire("old", LONG)
    assert store.claim("old", claims({"x": 100, "y": 100})) == {"x", "y"}
    assert store.release("old")
    # No lease is needed to hand over; only x was not sent.
    assert store.hand_over("old", [("x", 100)]) == {("x", 100)}
    assert store.changes(0).handed == 1
    # The proof is used up: the fence no longer names its claimer, and a second try is refused.
    assert store.fences()["x"] == Fence(100, "-", FP)
    assert store.hand_over("old", [("x", 100)]) == set()
    assert store.take_handed("new") == []  # only the lease holder takes them
    assert store.acquire("new", LONG)
    assert store.take_handed("new") == [("x", 100)]
    assert store.take_handed("new") == []
    assert store.changes(0).handed == 0


def test_a_claim_that_a_new_leader_moved_past_can_still_be_handed_over(store: Store) -> None:
    assert store.acquire("old", LONG)
    assert store.claim("old", claims({"x": 100, "y": 100})) == {"x", "y"}
    assert store.release("old")
    assert store.acquire("new", LONG)
    assert store.claim("new", claims({"x": 200, "y": 200})) == {"x", "y"}
    assert store.hand_over("old", [("x", 100), ("y", 150)]) == {("x", 100)}
    assert store.hand_over("old", [("x", 100)]) == set()
    assert store.take_handed("new") == [("x", 100)]
    assert store.fences()["x"] == Fence(200, "new", FP)


def test_nobody_hands_over_a_slot_it_did_not_claim(store: Store) -> None:
    assert store.acquire("a", LONG)
    assert store.claim("a", claims({"x": 100})) == {"x"}
    # Another beat, a slot never claimed, an entry never claimed: all refused.
    assert store.hand_over("b", [("x", 100)]) == set()
    assert store.hand_over("a", [("x", 90), ("nothing", 100)]) == set()
    # An anchor names no claimer, so nobody can hand over the instant it marks.
    assert store.anchor("a", {"z": (50, FP)}) == {"z": Fence(50, "", FP)}
    assert store.claim("a", claims({"z": 60})) == {"z"}
    with pytest.raises(ValueError, match="token"):
        store.hand_over("", [("z", 50)])
    # A claim that the claimer itself moved past is sent or given back by the claimer: no proof.
    assert store.claim("a", claims({"x": 200})) == {"x"}
    assert store.hand_over("a", [("x", 100)]) == set()
    assert store.take_handed("a") == []


def test_a_taker_whose_publish_failed_hands_the_slot_over_again(store: Store) -> None:
    assert store.acquire("old", LONG)
    assert store.claim("old", claims({"x": 100})) == {"x"}
    assert store.hand_over("old", [("x", 100)]) == {("x", 100)}
    assert store.release("old")
    assert store.acquire("new", LONG)
    assert store.take_handed("new") == [("x", 100)]
    assert store.hand_over("old", [("x", 100)]) == set()
    assert store.hand_over("new", [("x", 100)]) == {("x", 100)}
    assert store.take_handed("new") == [("x", 100)]


def test_handed_slots_come_oldest_first_and_names_keep_their_bars(store: Store) -> None:
    names = {"a|b": 300, "plain": 100, "ünï|code": 200}
    assert store.acquire("old", LONG)
    assert store.claim("old", claims(names)) == set(names)
    assert store.hand_over("old", names.items()) == set(names.items())
    assert store.acquire("old", LONG)
    assert store.take_handed("old") == [("plain", 100), ("ünï|code", 200), ("a|b", 300)]
