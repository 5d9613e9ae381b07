"""Balanced spread in the scheduler (docs/design.md §16): in-process beats on the real Redis."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterator

import pytest
from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.expr.slots import CronSlots
from celery_hashbeat.store import Store, open_store
from tests.support.beat_fixtures import Clock, Make, ticks

NAMES = [f"report-{n}" for n in range(60)]


@pytest.fixture
def store(app: Celery) -> Iterator[Store]:
    opened = open_store(app.conf.hashbeat_store_url, app.conf.hashbeat_key_prefix)
    yield opened
    opened.close()


def hourly(app: Celery, names: list[str], **options: object) -> None:
    app.conf.beat_schedule = {
        name: {"task": "t", "schedule": hashcron("H * * * *", **options)} for name in names
    }


def minutes(beat: object, prefix: str = "report-") -> dict[str, int]:
    """Each entry's minute, as the beat will run it."""
    found = {}
    for name, entry in beat.schedule.items():  # type: ignore[attr-defined]
        if name.startswith(prefix):
            assert isinstance(entry.source, CronSlots)
            found[name] = int(str(entry.source.expr).split()[0])
    return found


def by_hand(key: str, field: str = "minute", count: int = 60) -> int:
    """docs/design.md §3, computed here on its own."""
    digest = hashlib.sha256(f"{key}\x1f{field}\x1f0".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def peak(values: dict[str, int]) -> int:
    return max(Counter(values.values()).values())


def test_balance_off_keeps_every_value_of_the_seeding_contract(
    app: Celery, schedulers: Make
) -> None:
    hourly(app, NAMES)
    beat = schedulers()
    assert minutes(beat) == {name: by_hand(name) for name in NAMES}
    assert peak(minutes(beat)) > 2  # what balance is for: these sixty keys bunch up


def test_balance_on_keeps_the_busiest_minute_within_its_share_plus_one(
    app: Celery, schedulers: Make
) -> None:
    app.conf.hashbeat_balance = True
    hourly(app, NAMES)
    found = minutes(schedulers())
    assert peak(found) <= math.ceil(len(NAMES) / 60) + 1
    kept = sum(found[name] == by_hand(name) for name in NAMES)
    assert kept >= len(NAMES) // 2, "most entries keep their hashed minute"


def test_balanced_per_entry_balances_only_those(app: Celery, schedulers: Make) -> None:
    hourly(app, NAMES, balanced=True)
    app.conf.beat_schedule["plain"] = {"task": "t", "schedule": hashcron("H * * * *")}
    app.conf.beat_schedule["opted-out"] = {
        "task": "t",
        "schedule": hashcron("H * * * *", balanced=False),
    }
    app.conf.hashbeat_balance = True
    beat = schedulers()
    assert peak(minutes(beat)) <= 2
    assert minutes(beat, "opted-out") == {"opted-out": by_hand("opted-out")}


def test_every_beat_computes_the_same_assignment_and_the_leader_stores_it(
    app: Celery, clock: Clock, schedulers: Make, store: Store
) -> None:
    app.conf.hashbeat_balance = True
    hourly(app, NAMES)
    first, second = schedulers(clock), schedulers(clock)
    assert minutes(first) == minutes(second)
    ticks(first, second)
    stored = json.loads(store.shared("balance") or "{}")  # as docs/seeding.md describes it
    [group] = stored["groups"]
    assert group["sizes"] == [60]
    assert dict(zip(group["entries"], group["slots"], strict=True)) == minutes(first)


def test_an_added_entry_moves_few_others(app: Celery, schedulers: Make) -> None:
    app.conf.hashbeat_balance = True
    hourly(app, NAMES)
    beat = schedulers()
    before = minutes(beat)
    beat.update_from_dict({"report-new": {"task": "t", "schedule": hashcron("H * * * *")}})
    after = minutes(beat)
    moved = [name for name in before if before[name] != after[name]]
    assert len(moved) <= 4, moved
    assert peak(after) <= math.ceil(len(after) / 60) + 1


def test_copies_on_workers_get_distinct_seconds(app: Celery, schedulers: Make) -> None:
    nodes = [f"celery@web-{n}" for n in range(1, 21)]
    app.conf.update(worker_direct=True, hashbeat_balance=True)
    app.conf.beat_schedule = {
        "refresh": {"task": "t", "schedule": hashcron("H * * * * *"), "workers": nodes}
    }
    beat = schedulers()
    seconds = [
        int(str(entry.source.expr).split()[0])
        for name, entry in beat.schedule.items()
        if name.startswith("refresh@")
    ]
    assert len(seconds) == 20
    assert len(set(seconds)) == 20, sorted(seconds)


def test_a_bad_balance_setting_is_named(app: Celery, schedulers: Make) -> None:
    app.conf.hashbeat_balance = "maybe"
    with pytest.raises(SystemExit, match="hashbeat_balance must be True or False, not 'maybe'"):
        schedulers()


def test_the_balance_setting_may_be_text(app: Celery, schedulers: Make) -> None:
    app.conf.hashbeat_balance = "True"  # as an environment variable gives it
    hourly(app, NAMES)
    assert peak(minutes(schedulers())) <= 2


def test_copies_on_every_live_worker_get_distinct_seconds(
    app: Celery, clock: Clock, schedulers: Make, store: Store
) -> None:
    nodes = [f"celery@web-{n}" for n in range(1, 21)]
    app.conf.update(worker_direct=True, hashbeat_balance=True)
    app.conf.beat_schedule = {
        "refresh": {"task": "t", "schedule": hashcron("H * * * * *"), "workers": "*"}
    }
    assert store.acquire("former-leader", 60_000)
    assert store.set_roster("former-leader", nodes, 0)
    store.release("former-leader")
    beat = schedulers(clock)
    ticks(beat)  # takes the lease and fans out to the stored roster
    seconds = {
        name: int(str(entry.source.expr).split()[0])
        for name, entry in beat.schedule.items()
        if name.startswith("refresh@")
    }
    assert len(seconds) == 20
    assert len(set(seconds.values())) == 20, sorted(seconds.values())
    pure = [by_hand(f"refresh@{node}", "second") for node in nodes]
    assert len(set(pure)) < 20  # the hash alone puts some of them on one second


def test_after_entries_come_go_and_change_the_values_are_those_of_a_fresh_start(
    app: Celery, schedulers: Make
) -> None:
    """The values follow the group, not its history: a beat whose entries came, left and
    changed runs each at the minute a beat started on the final schedule gives it."""
    app.conf.hashbeat_balance = True
    hourly(app, NAMES)
    beat = schedulers()
    final = {
        name: {"task": "t", "schedule": hashcron("H * * * *")}
        for name in [*NAMES[7:], "report-new"]
    }
    final["report-9"] = {"task": "changed", "schedule": hashcron("H * * * *")}
    beat.update_from_dict({"report-new": final["report-new"]})
    beat.merge_inplace(final)
    app.conf.beat_schedule = final
    assert minutes(beat) == minutes(schedulers())
    assert beat.schedule["report-9"].task == "changed"
    assert peak(minutes(beat)) <= math.ceil(len(final) / 60) + 1
