"""The record of sent slots (store/sent.py), on every store: claims write it, give-backs undo
it, hand-overs keep it, and a backfill claims only what nobody claimed, within the horizon."""

from __future__ import annotations

import time

from celery_hashbeat.store import Store
from celery_hashbeat.store.sent import SENT_KEEP_MS

LONG = 60_000
FP = "fp1"


def now_ms() -> int:
    return int(time.time() * 1000)


def started(store: Store) -> int:
    """Lead as "a" and make a first claim, so that recording has begun; a moment later, the
    instant it began (every slot after it, up to now, is within the horizon)."""
    assert store.acquire("a", LONG)
    begun = now_ms()
    assert store.claim("a", {"first": (begun, FP)}) == {"first"}
    time.sleep(0.3)
    return begun + 50


def test_a_backfill_claims_each_unsent_slot_once_and_not_those_claimed_before(
    store: Store,
) -> None:
    t = started(store)
    assert store.claim("a", {"x": (t + 20, FP)}) == {"x"}
    claim = store.claim_slots("a", "x", [t, t + 10, t + 20], claimer="r0")
    assert claim is not None
    assert (claim.claimed, claim.sent) == ((t, t + 10), (t + 20,))
    again = store.claim_slots("a", "x", [t, t + 10, t + 20], claimer="r1")
    assert again is not None
    assert (again.claimed, again.sent) == ((), (t, t + 10, t + 20))
    # Another entry's slots are its own.
    other = store.claim_slots("a", "y", [t], claimer="r0")
    assert other is not None and other.claimed == (t,)
    assert store.recorded("x", [t, t + 5, t + 10, t + 20]).sent == {t, t + 10, t + 20}


def test_a_regular_claim_does_not_claim_a_slot_a_backfill_sent(store: Store) -> None:
    t = started(store)
    assert store.claim("a", {"x": (t, FP)}) == {"x"}
    claim = store.claim_slots("a", "x", [t + 100], claimer="r0")
    assert claim is not None and claim.claimed == (t + 100,)
    # Later than the fence, but recorded: refused as a slot already claimed is.
    assert store.claim("a", {"x": (t + 100, FP)}) == set()
    assert store.fences()["x"].slot == t
    assert store.claim("a", {"x": (t + 200, FP)}) == {"x"}


def test_a_claim_refuses_recorded_slots_however_many_records_its_span_holds(
    store: Store,
) -> None:
    """Redis reads the record of the claimed slots' span in one command, and checks slot by slot
    when that span holds too many records (a catch-up's): either way a recorded slot is refused."""
    t = started(store)
    crowd = [t + 1000 + i for i in range(400)]
    assert store.claim_slots("a", "y", crowd, claimer="r0") is not None
    claim = store.claim_slots("a", "x", [t + 1200, t + 1300], claimer="r0")
    assert claim is not None and claim.claimed == (t + 1200, t + 1300)
    # A short span: two records in it.
    assert store.claim("a", {"x": (t + 1200, FP), "v": (t + 1200, FP)}) == {"v"}
    # The whole crowd in the span.
    wide = {"x": (t + 1300, FP), "z": (t + 1000, FP), "w": (t + 1399, FP)}
    assert store.claim("a", wide) == {"z", "w"}
    assert store.recorded("z", [t + 1000]).sent == {t + 1000}
    assert store.recorded("w", [t + 1399]).sent == {t + 1399}
    assert "x" not in store.fences()


def test_a_give_back_unrecords_the_slot_so_a_backfill_can_send_it(store: Store) -> None:
    t = started(store)
    assert store.claim("a", {"x": (t, FP)}) == {"x"}
    assert store.recorded("x", [t]).sent == {t}
    assert store.unclaim("a", {"x": t}) == {"x"}
    assert store.recorded("x", [t]).sent == set()
    claim = store.claim_slots("a", "x", [t], claimer="r0")
    assert claim is not None and claim.claimed == (t,)
    # A backfill's own give-back, under the lease only.
    assert store.unclaim_slots("b", "x", [t], claimer="r0") == set()
    assert store.unclaim_slots("a", "x", [t, t + 1], claimer="r0") == {t}
    assert store.recorded("x", [t]).sent == set()


def test_a_hand_over_keeps_the_record(store: Store) -> None:
    t = started(store)
    assert store.claim("a", {"x": (t, FP)}) == {"x"}
    assert store.release("a")
    assert store.hand_over("a", [("x", t)]) == {("x", t)}
    assert store.acquire("b", LONG)
    assert store.take_handed("b") == [("x", t)]
    claim = store.claim_slots("b", "x", [t], claimer="r0")
    assert claim is not None and (claim.claimed, claim.sent) == ((), (t,))


def test_only_the_lease_holder_claims_for_a_backfill(store: Store) -> None:
    t = started(store)
    assert store.claim_slots("b", "x", [t], claimer="r0") is None
    assert store.recorded("x", [t]).sent == set()


def test_slots_before_recording_began_or_past_the_retention_are_unknowable(
    store: Store,
) -> None:
    # Nothing recorded yet: nothing in the past can be known.
    before = now_ms()
    assert store.recorded("x", [before - 1000]).horizon_ms >= before
    t = started(store)
    known = store.recorded("x", [t])
    assert t - 50 - 2_000 <= known.horizon_ms <= t
    assert store.acquire("a", LONG)
    claim = store.claim_slots(
        "a", "x", [t - 60_000, now_ms() - SENT_KEEP_MS - 1000, t], claimer="r0"
    )
    assert claim is not None
    assert (claim.claimed, claim.sent) == ((t,), ())


def test_a_claim_retried_by_its_claimer_takes_its_slots_again_and_nobody_else_does(
    store: Store,
) -> None:
    """A backfill claim whose reply was lost is asked again with the same claimer: the slots
    it recorded are its own, not sent, so they are claimed again; another claimer's and the
    regular path's stay sent."""
    t = started(store)
    assert store.claim("a", {"x": (t + 30, FP)}) == {"x"}
    lost = store.claim_slots("a", "x", [t, t + 10], claimer="r1")
    assert lost is not None and lost.claimed == (t, t + 10)
    retried = store.claim_slots("a", "x", [t, t + 10, t + 20, t + 30], claimer="r1")
    assert retried is not None
    assert (retried.claimed, retried.sent) == ((t, t + 10, t + 20), (t + 30,))
    other = store.claim_slots("a", "x", [t, t + 10, t + 20, t + 30], claimer="r2")
    assert other is not None
    assert (other.claimed, other.sent) == ((), (t, t + 10, t + 20, t + 30))
    # Given back and claimed by another claimer, a slot is no longer the first one's.
    assert store.unclaim_slots("a", "x", [t], claimer="r1") == {t}
    taken = store.claim_slots("a", "x", [t], claimer="r2")
    assert taken is not None and taken.claimed == (t,)
    again = store.claim_slots("a", "x", [t], claimer="r1")
    assert again is not None and again.sent == (t,)
