"""Entry histories (docs/design.md §14), against both stores: capped, newest first, and carried by
the calls the beat makes anyway (claim and renew) whether or not it holds the lease."""

from __future__ import annotations

from celery_hashbeat.store import Store
from celery_hashbeat.store.base import HISTORY_CAP

LONG = 60_000


def test_records_come_back_newest_first_per_entry(store: Store) -> None:
    store.record([("x", "1"), ("y", "a"), ("x", "2")])
    store.record([("x", "3")])
    assert store.history("x") == ["3", "2", "1"]
    assert store.history("x", limit=2) == ["3", "2"]
    assert store.history("y") == ["a"]
    assert store.history("never") == []


def test_a_history_keeps_only_its_newest_records(store: Store) -> None:
    store.record([("x", str(n)) for n in range(HISTORY_CAP + 30)])
    store.record([("x", "last")])
    kept = store.history("x", limit=HISTORY_CAP + 50)
    assert len(kept) == HISTORY_CAP
    assert kept[0] == "last"
    assert kept[-1] == str(30 + 1)


def test_claim_and_renew_carry_history_in_the_same_call(store: Store) -> None:
    assert store.acquire("a", LONG)
    claimed = store.claim("a", {"x": (10, "fp")}, history=[("x", "sent-5")])
    assert claimed == {"x"}
    assert store.renew("a", LONG, history=[("x", "sent-10")])
    assert store.history("x") == ["sent-10", "sent-5"]


def test_history_is_recorded_even_without_the_lease(store: Store, connect: object) -> None:
    """A deposed leader's last outcomes still happened: they are kept, its claim is not."""
    assert store.acquire("a", LONG)
    assert store.claim("b", {"x": (10, "fp")}, history=[("x", "late")]) == set()
    assert not store.renew("b", LONG, history=[("x", "later")])
    assert store.claim("b", {}, history=[("x", "nothing-due")]) == set()
    assert store.history("x") == ["nothing-due", "later", "late"]
    assert store.fences() == {}
