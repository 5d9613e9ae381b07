"""Balanced entries built together (docs/design.md §16, "A million entries"): the entries placed
at one slot share what that schedule decides (its slots, its fingerprint), and each still keeps
what its own definition says, and is refused by its own name."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.settings import Settings

APP = Celery("balanced-together", set_as_current=False)
SETTINGS = Settings.from_conf(APP.conf, warn=False)
NOW_MS = 1_893_456_000_000  # 2030-01-01T00:00:00Z


def built(schedule: dict[str, Any]) -> tuple[Catalog, dict[str, str]]:
    return Catalog.preview(APP, SETTINGS, NOW_MS, schedule)


def by_slot(catalog: Catalog) -> dict[tuple[int, ...], list[Entry]]:
    found: dict[tuple[int, ...], list[Entry]] = defaultdict(list)
    for name, offsets in catalog.balancer.offsets.items():
        found[offsets].append(catalog.entries[name])
    return found


def test_entries_placed_at_one_second_share_its_slots_and_fingerprint() -> None:
    schedule = {
        f"job-{i}": {"task": "t", "schedule": hashcron("H * * * * *", balanced=True)}
        for i in range(150)
    }
    catalog, refusals = built(schedule)
    assert not refusals
    groups = by_slot(catalog)
    assert sum(map(len, groups.values())) == 150
    assert max(map(len, groups.values())) <= 150 // 60 + 2  # balanced: ceil(N / slots) + 1
    for (second,), entries in groups.items():
        assert len({id(entry.source) for entry in entries}) == 1
        assert len({entry.fingerprint for entry in entries}) == 1
        assert entries[0].source.next_after(NOW_MS) == NOW_MS + (second or 60) * 1000
    assert len({entries[0].fingerprint for entries in groups.values()}) == len(groups)


def test_each_entry_keeps_its_own_task_arguments_and_policy_at_a_shared_slot() -> None:
    schedule: dict[str, Any] = {}
    for i in range(180):
        definition: dict[str, Any] = {
            "task": f"task-{i}",
            "schedule": hashcron("H * * * * *", balanced=True),
            "args": (i,),
            "kwargs": {"i": i},
        }
        if i % 3 == 1:
            definition |= {"catch_up": "all", "overlap": "skip", "catch_up_window": 30}
        if i % 3 == 2:
            definition["max_runs"] = i
        schedule[f"job-{i}"] = definition
    catalog, refusals = built(schedule)
    assert not refusals
    mixed = [
        entries
        for entries in by_slot(catalog).values()
        if len({int(entry.name.split("-")[1]) % 3 for entry in entries}) > 1
    ]
    assert mixed, "no second holds entries of different kinds: the test checks nothing"
    for name in schedule:
        entry, i = catalog.entries[name], int(name.split("-")[1])
        assert (entry.task, entry.args, entry.kwargs) == (f"task-{i}", (i,), {"i": i})
        if i % 3 == 1:
            assert (entry.catch_up, entry.overlap, entry.window) == ("all", "skip", 30_000)
        else:
            assert (entry.catch_up, entry.overlap) == (SETTINGS.catch_up, SETTINGS.overlap)
            window_s = SETTINGS.catch_up_window
            assert entry.window == (None if window_s is None else round(window_s * 1000))
        assert entry.max_runs == (i if i % 3 == 2 else None)


def test_every_entry_of_a_placed_schedule_that_cannot_run_is_refused_by_its_own_name() -> None:
    never = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
    schedule = {
        f"job-{i}": {"task": "t", "schedule": hashcron("H * * * * *", balanced=True, exclude=never)}
        for i in range(5)
    }
    catalog, refusals = built(schedule)
    assert sorted(refusals) == sorted(schedule)
    for name, message in refusals.items():
        assert message.startswith(f"entry {name!r}: ")
        assert "every weekday is excluded" in message
    assert not catalog.entries.keys() & schedule.keys()
