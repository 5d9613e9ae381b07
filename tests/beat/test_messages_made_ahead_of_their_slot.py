"""When the leader makes messages before their slots (``ahead``): each slot once, in order, no
earlier than a window before it, woken at the times it asks for."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given

from celery_hashbeat.publish.ahead import Ahead
from tests.beat.test_slot_queue_against_a_scan import items, queue_of


@given(items)
def test_each_slot_is_made_once_as_the_window_moves_on(found: list[tuple[int, bool, bool]]) -> None:
    queue, entries = queue_of(found)
    ahead = Ahead(window_ms=300)
    made: list[int] = []
    now = 0
    while now <= 2_000:
        head = min((due for due, _ in entries.values() if due >= now), default=None)
        if head is None:
            break
        if ahead.due(head, now):
            taken = ahead.take(queue, now)
            assert [slot for _, slot in taken] == sorted(slot for _, slot in taken)
            assert all(slot - now <= 300 for _, slot in taken)
            made += [slot for _, slot in taken]
        now = max(now + 1, ahead.wake_at(head))
    wanted = sorted(
        due
        for due, entry in entries.values()
        if due > 0 and cast(Any, entry).slot is not None and cast(Any, entry).active
    )
    assert sorted(made) == wanted
