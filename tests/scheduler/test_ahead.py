"""Which slots the leader makes messages for before they are due (``ahead``): found in the heap
without popping it, checked against a plain scan of every entry."""

from __future__ import annotations

from dataclasses import dataclass
from heapq import heapify
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from celery_hashbeat.ahead import Ahead, upcoming


@dataclass
class Slotted:
    """What ``upcoming`` reads of an entry."""

    slot: int | None
    active: bool = True


items = st.lists(st.tuples(st.integers(0, 2_000), st.booleans(), st.booleans()), max_size=200)


def heap_of(found: list[tuple[int, bool, bool]]) -> list[tuple[int, int, Any]]:
    """A scheduler-like queue: (due, order, entry), the entry's slot its due time unless it is
    waiting to be planned again (no slot)."""
    queue = [
        (due, order, Slotted(None if unplanned else due, active))
        for order, (due, unplanned, active) in enumerate(found)
    ]
    heapify(queue)
    return queue


@given(items, st.integers(-1, 2_100), st.integers(0, 400))
def test_upcoming_finds_exactly_the_active_slots_in_the_window(
    found: list[tuple[int, bool, bool]], after: int, width: int
) -> None:
    queue = heap_of(found)
    until = after + width
    expected = sorted(
        (due, order)
        for due, order, entry in queue
        if after < due <= until and entry.slot is not None and entry.active
    )
    got = upcoming(cast(Any, queue), after, until)
    assert sorted((slot, next(o for d, o, e in queue if e is entry)) for entry, slot in got) == (
        expected
    )


@given(items)
def test_each_slot_is_made_once_as_the_window_moves_on(found: list[tuple[int, bool, bool]]) -> None:
    """Woken at the times it asks for, the leader makes each slot's message once, in slot order,
    no earlier than a window before the slot."""
    queue = heap_of(found)
    ahead = Ahead(window_ms=300)
    made: list[int] = []
    now = 0
    while now <= 2_000:
        head = min((due for due, _, _ in queue if due >= now), default=None)
        if head is None:
            break
        if ahead.due(head, now):
            taken = ahead.take(cast(Any, queue), now)
            assert [slot for _, slot in taken] == sorted(slot for _, slot in taken)
            assert all(slot - now <= 300 for _, slot in taken)
            made += [slot for _, slot in taken]
        now = max(now + 1, ahead.wake_at(head))
    wanted = sorted(
        due for due, _, entry in queue if due > 0 and entry.slot is not None and entry.active
    )
    assert sorted(made) == wanted
