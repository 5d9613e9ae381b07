"""An entry's two seams: the owner that built it (SharedSlots, seen through the EntryOwner
protocol) and the fence the store keeps for it (seen through StoredFence): which entries the
store must anchor, and a schedule replaced in place reported to the owner."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.entries.building import build_entry
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.entries.sharing import SharedSlots
from celery_hashbeat.settings import Settings
from celery_hashbeat.store.values import Fence

NOW = 1_900_000_000_000


@pytest.fixture
def shared() -> SharedSlots:
    return SharedSlots(Celery("owner", set_as_current=False, config_source={"timezone": "UTC"}))


def build(shared: SharedSlots, schedule: object) -> Entry:
    return build_entry("e", {"task": "t", "schedule": schedule}, Settings(), shared, NOW)


def test_an_interval_the_store_has_not_seen_is_anchored(shared: SharedSlots) -> None:
    assert build(shared, timedelta(minutes=5)).needs_anchor(None)


def test_a_hashed_schedule_the_store_has_not_seen_is_not_anchored(shared: SharedSlots) -> None:
    assert not build(shared, hashcron("H * * * *")).needs_anchor(None)


def test_a_fence_of_the_same_schedule_needs_no_anchor(shared: SharedSlots) -> None:
    entry = build(shared, timedelta(minutes=5))
    assert not entry.needs_anchor(Fence(NOW, "beat", entry.fingerprint))


def test_a_fence_of_another_schedule_is_anchored_again(shared: SharedSlots) -> None:
    entry = build(shared, hashcron("H * * * *"))
    assert entry.needs_anchor(Fence(NOW, "beat", "0123456789abcdef"))


def test_a_fence_whose_schedule_was_not_recorded_counts_as_this_one(shared: SharedSlots) -> None:
    """A fence written before fingerprints were recorded keeps the entry where it was: the
    interval keeps its phase and its missed slots."""
    entry = build(shared, timedelta(minutes=5))
    assert not entry.needs_anchor(Fence(NOW, "beat", None))


def test_a_schedule_replaced_in_place_is_reported_to_the_owner(shared: SharedSlots) -> None:
    entry = build(shared, hashcron("H * * * *"))
    entry.schedule = 60
    assert shared.changed == [entry]
    assert entry.schedule is shared.schedule_object(60, False)
    assert entry.app is shared.app
