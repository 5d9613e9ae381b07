"""The runtime controls (store/controls.py): stored entries, pauses, the version and triggers,
against both stores."""

from __future__ import annotations

import time
from collections.abc import Callable

from celery_hashbeat.store import Store
from celery_hashbeat.store.controls import DEFINITION, PAUSE

LONG = 60_000


def test_a_read_since_a_version_lists_only_what_changed_after_it(store: Store) -> None:
    first = store.edit("a", {DEFINITION: '{"a": 1}'})
    second = store.edit("b", {DEFINITION: '{"b": 1}', PAUSE: '{"reason": "x"}'})
    assert first is not None and second is not None and second > first
    everything = store.changes(0)
    assert everything.full
    assert everything.records == {"a": ('{"a": 1}', None), "b": ('{"b": 1}', '{"reason": "x"}')}
    since_first = store.changes(first)
    assert not since_first.full
    assert since_first.records == {"b": ('{"b": 1}', '{"reason": "x"}')}
    assert since_first.version == second
    unchanged = store.changes(second)
    assert unchanged.records == {} and unchanged.version == second and not unchanged.full


def test_an_edit_keeps_what_it_does_not_name_and_deletes_what_it_sets_to_none(
    store: Store,
) -> None:
    store.edit("a", {DEFINITION: "d1", PAUSE: "p1"})
    store.edit("a", {PAUSE: None})
    assert store.changes(0).records == {"a": ("d1", None)}
    version = store.edit("a", {DEFINITION: None})
    assert version is not None
    # The name stays listed, with nothing stored, so that a beat learns of the removal.
    assert store.changes(version - 1).records == {"a": (None, None)}


def test_a_requirement_that_fails_changes_nothing(store: Store) -> None:
    assert store.edit("a", {DEFINITION: "d1"}, require=True) is None
    assert store.changes(0).records == {}
    assert store.edit("a", {DEFINITION: "d1"}, require=False) is not None
    before = store.changes(0)
    assert store.edit("a", {DEFINITION: "d2"}, require=False) is None
    assert store.changes(0) == before
    assert store.edit("a", {DEFINITION: "d2"}, require=True) is not None
    assert store.changes(0).records == {"a": ("d2", None)}


def test_a_definition_is_swapped_only_if_it_is_still_the_one_read(store: Store) -> None:
    """Compare-and-set: of two writers that read "d1", the first lands and the second changes
    nothing, not even the version; the pause beside it stays."""
    read = store.edit("a", {DEFINITION: "d1", PAUSE: "p1"})
    assert read is not None
    swapped = store.swap_definition("a", "d1", "d2")
    assert swapped == read + 1
    assert store.changes(read).records == {"a": ("d2", "p1")}
    assert store.swap_definition("a", "d1", "d3") is None
    assert store.changes(0).records == {"a": ("d2", "p1")}
    assert store.changes(0).version == swapped
    store.edit("a", {DEFINITION: None})
    assert store.swap_definition("a", "d2", "d4") is None  # removed meanwhile
    assert store.swap_definition("b", "", "d1") is None  # never stored: nothing to swap
    assert store.changes(0).records == {"a": (None, "p1")}


def test_a_version_later_than_the_stores_reads_everything(
    store: Store, connect: Callable[..., Store]
) -> None:
    store.edit("a", {DEFINITION: "d1"})
    # A beat that saw version 50 of a store since emptied must not wait for it to come back.
    assert store.changes(50).full
    assert store.changes(50).records == {"a": ("d1", None)}


def test_triggers_are_taken_by_the_leader_only_kept_until_settled_and_given_back_in_order(
    store: Store, connect: Callable[..., Store]
) -> None:
    other = connect()
    assert store.acquire("leader", LONG)
    before = store.changes(0).version
    store.ask("t1")
    store.ask("t2")
    seen = store.changes(before)
    assert seen.version > before and seen.triggers == 2
    assert other.take_triggers("standby") == []
    assert store.triggers() == ["t1", "t2"]
    taken = store.take_triggers("leader")
    assert taken == ["t1", "t2"] and taken.recovered == 0
    store.ask("t3")
    assert not other.give_back_triggers("standby", ["t1"])
    assert store.give_back_triggers("leader", ["t1", "t2"])
    assert store.triggers() == ["t1", "t2", "t3"]
    assert store.changes(0).triggers == 3
    assert store.take_triggers("leader") == ["t1", "t2", "t3"]
    assert store.give_back_triggers("leader", [])
    assert store.take_triggers("leader") == []
    assert store.triggers() == []


def test_a_take_not_settled_is_recovered_by_its_own_leaders_next_take(store: Store) -> None:
    """A settle that never reached the store (it timed out) leaves the take in place: the same
    leader's next take hands it back, before what was queued since, and a settle clears both."""
    assert store.acquire("leader", LONG)
    store.ask("r1")
    assert store.take_triggers("leader") == ["r1"]
    store.ask("t2")
    assert store.triggers() == ["r1", "t2"]
    again = store.take_triggers("leader")
    assert again == ["r1", "t2"] and again.recovered == 1
    assert store.give_back_triggers("leader", ["r1"])
    assert store.triggers() == ["r1"]
    assert store.take_triggers("leader").recovered == 0


def test_prefixes_keep_their_controls_apart(store: Store, connect: Callable[..., Store]) -> None:
    other = connect(prefix="hashbeat-other")
    store.edit("a", {DEFINITION: "d1"})
    store.ask("t1")
    assert other.changes(0).records == {}
    assert other.triggers() == []


def test_one_names_records_are_read_alone(store: Store) -> None:
    store.edit("a", {DEFINITION: "d1", PAUSE: "p1"})
    store.edit("b", {DEFINITION: "d2"})
    assert store.controls_of("a") == ("d1", "p1")
    assert store.controls_of("b") == ("d2", None)
    assert store.controls_of("nobody") == (None, None)


def test_what_a_killed_leader_took_and_never_put_back_is_taken_again_by_the_next(
    store: Store, connect: Callable[..., Store]
) -> None:
    """A take keeps what it takes until the taker settles it (docs/design.md §19): leader A
    takes a backfill request and dies before putting it back; once A's lease is gone, leader B's
    take gets the request again, ahead of what waits in the queue, and marks it as recovered."""
    successor = connect()
    request = '{"backfill": "r1", "entry": "tick", "from": 1, "to": 2, "at": 3}'
    assert store.acquire("leader-a", 200)
    store.ask(request)
    assert store.take_triggers("leader-a") == [request]
    # A is killed here: nothing puts the request back. Its lease runs out.
    time.sleep(0.4)
    assert store.changes(0).triggers == 1, "the request taken and not settled still counts"
    assert successor.acquire("leader-b", LONG)
    successor.ask("t2")
    taken = successor.take_triggers("leader-b")
    assert taken == [request, "t2"]
    assert taken.recovered == 1
    # B settles its turn: nothing to put back, and nothing taken stays behind.
    assert successor.give_back_triggers("leader-b", [])
    assert successor.take_triggers("leader-b") == []
    assert successor.changes(0).triggers == 0
