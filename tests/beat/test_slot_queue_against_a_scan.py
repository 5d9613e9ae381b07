"""The leader's queue (``slotqueue``): what it finds and pops, checked against a plain scan, and
what it costs Python's collector, checked on a real scheduler."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from celery import Celery
from hypothesis import given
from hypothesis import strategies as st

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.beat.slotqueue import SlotQueue
from tests.support.beat_fixtures import Broker, Clock

Make = Callable[..., Scheduler]


@dataclass(eq=False)
class Slotted:
    """What the queue reads of an entry."""

    name: str
    order: int
    slot: int | None
    active: bool = True


#: Per item: when it is due, whether its entry waits to be planned again (no slot), and whether
#: the entry is active.
items = st.lists(st.tuples(st.integers(0, 2_000), st.booleans(), st.booleans()), max_size=200)


def queue_of(found: list[tuple[int, bool, bool]]) -> tuple[SlotQueue, dict[str, tuple[int, Any]]]:
    """A queue of one entry per item, and the entries by name with when each is due; every third
    entry was replaced after it was queued (its item is stale, the new entry not queued)."""
    names: dict[str, Any] = {}
    queue = SlotQueue(names)
    current: dict[str, tuple[int, Any]] = {}
    for order, (due, unplanned, active) in enumerate(found):
        entry = Slotted(f"e{order}", order, None if unplanned else due, active)
        names[entry.name] = entry
        queue.push(cast(Any, entry), due)
        if order % 3 == 2:
            names[entry.name] = Slotted(entry.name, order + 10_000, due, active)
        else:
            current[entry.name] = (due, entry)
    return queue, current


@given(items, st.integers(-1, 2_100), st.integers(0, 400))
def test_upcoming_finds_exactly_the_current_active_slots_in_the_window(
    found: list[tuple[int, bool, bool]], after: int, width: int
) -> None:
    queue, entries = queue_of(found)
    until = after + width
    expected = sorted(
        (due, name)
        for name, (due, entry) in entries.items()
        if after < due <= until and entry.slot is not None and entry.active
    )
    got = queue.upcoming(after, until)
    assert sorted((slot, cast(Any, entry).name) for entry, slot in got) == expected


@given(items)
def test_pop_yields_the_current_entries_in_due_order(found: list[tuple[int, bool, bool]]) -> None:
    queue, entries = queue_of(found)
    popped = []
    while (head := queue.head()) is not None:
        entry = queue.pop()
        if entry is not None:
            popped.append((head, cast(Any, entry).name))
    assert len(queue) == 0
    assert [due for due, _ in popped] == sorted(due for due, _ in popped)
    assert sorted(popped) == sorted((due, name) for name, (due, _) in entries.items())


def test_a_leader_leaves_nothing_per_entry_for_the_collector_to_walk(
    app: Celery, schedulers: Make, clock: Clock, broker: Broker
) -> None:
    """After every entry has been sent and queued again, no object that the collector's passes
    walk refers to an entry, so its passes cost the same at any number of entries. (The queue
    held a tracked tuple per entry: a full pass at a million entries took up to a second.)"""
    names = [f"spread-{i}" for i in range(300)]
    app.conf.beat_schedule = {
        name: {"task": "t.x", "schedule": hashcron("H * * * * *")} for name in names
    }
    scheduler = schedulers(clock)
    scheduler.tick()
    assert scheduler.is_leader
    for _ in range(61):
        clock.advance(1)
        scheduler.tick()
    assert {h["hashbeat_entry"] for h in broker.headers()} == set(names)
    gc.collect()
    # The last tick's batch still holds the entries it sent (one second's worth): not those.
    last = int(clock.now) * 1000
    quiet = [scheduler.entries[n] for n in names if scheduler.entries[n].last_slot != last]
    assert len(quiet) > len(names) * 0.9
    walked = [
        referrer
        for referrer in gc.get_referrers(*quiet)
        if referrer is not scheduler.entries and referrer is not quiet
    ]
    assert walked == [], f"{len(walked)} tracked objects refer to entries, e.g. {walked[:3]}"
