"""``ScheduleAdmin`` shows the slots the leader sends: a balanced entry at its
balanced slot, a fanned-out entry at its copies' slots, an entry that used up its ``max_runs``
with none. A real Scheduler leads on the real Redis."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from celery import Celery

from celery_hashbeat import ScheduleAdmin, Scheduler, hashcron
from celery_hashbeat.store import Store, open_store

BALANCED = [f"report-{n}" for n in range(60)]


@pytest.fixture
def app(redis_url: str, key_prefix: str) -> Iterator[Celery]:
    app = Celery(f"admin-{key_prefix}", broker="memory://", set_as_current=False)
    app.conf.update(
        timezone="UTC",
        beat_enable_remote_control=False,
        worker_direct=True,
        hashbeat_store_url=redis_url,
        hashbeat_key_prefix=key_prefix,
        beat_schedule={
            "fanned": {
                "task": "t.ping",
                "schedule": hashcron("H H * * *"),
                "workers": ["celery@a", "celery@b"],
            },
            "twice": {"task": "t.ping", "schedule": hashcron("H H * * *"), "max_runs": 2},
            **{
                name: {"task": "t.report", "schedule": hashcron("H * * * *", balanced=True)}
                for name in BALANCED
            },
        },
    )
    yield app
    app.close()


@pytest.fixture
def store(app: Celery) -> Iterator[Store]:
    opened = open_store(app.conf.hashbeat_store_url, app.conf.hashbeat_key_prefix)
    yield opened
    opened.close()


@pytest.fixture
def leader(app: Celery) -> Iterator[Scheduler]:
    """A beat that leads, its entries planned; it ticks no more, so its plan stays put."""
    beat = Scheduler(app, lazy=True)
    beat.setup_schedule()
    for _ in range(50):
        beat.tick()
        if beat.is_leader and all(entry.slot is not None for entry in beat.entries.values()):
            break
        time.sleep(0.05)
    assert beat.is_leader
    yield beat
    beat.close()


def test_balanced_entries_show_the_slot_the_leader_placed_them_at(
    app: Celery, store: Store, leader: Scheduler
) -> None:
    planned_at = leader.now_ms()
    views = {view.name: view for view in ScheduleAdmin(app, store).list()}
    listed_at = int(time.time() * 1000)
    placed = {
        name: leader.entries[name].slot
        for name in BALANCED
        if not planned_at <= (leader.entries[name].slot or 0) <= listed_at + 1000
    }
    assert len(placed) >= len(BALANCED) - 2
    assert {name: views[name].next_slots[0] for name in placed} == placed


def test_a_fanned_out_entry_shows_its_copies_slots(
    app: Celery, store: Store, leader: Scheduler
) -> None:
    view = ScheduleAdmin(app, store).get("fanned")
    copies = sorted(leader.entries[f"fanned@celery@{node}"].slot or 0 for node in "ab")
    assert view.next_slots[:2] == copies
    assert len(view.next_slots) == 10


def test_an_entry_that_used_up_its_max_runs_shows_no_next_slot(
    app: Celery, store: Store, leader: Scheduler
) -> None:
    admin = ScheduleAdmin(app, store)
    assert len(admin.get("twice").next_slots) == 2, "two runs left: two slots"
    first = leader.entries["twice"].slot
    assert first is not None
    for slot in (first, first + 86_400_000):
        assert store.claim(leader.token, {"twice": (slot, leader.entries["twice"].fingerprint)})
    assert store.fences(["twice"])["twice"].runs == 2
    assert admin.get("twice").next_slots == []
