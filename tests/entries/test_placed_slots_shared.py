"""The balancer's placed schedules share their slots (docs/design.md §16, "A million entries"):
what a warm SharedSlots hands out is what a fresh one builds, for every name, zone and day rule."""

from __future__ import annotations

from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.entries.sharing import SharedSlots
from celery_hashbeat.expr.slots import CronSlots, Slots

NOW_MS = 1_893_456_000_000  # 2030-01-01T00:00:00Z


def described(source: Slots) -> tuple[str, str, list[int]]:
    assert isinstance(source, CronSlots)
    following = [source.next_after(NOW_MS)]
    following.append(source.next_after(following[0]))
    return str(source.expr), str(source.expr.tz), following


def test_a_warm_table_gives_what_a_fresh_one_builds(app: Celery) -> None:
    warm = SharedSlots(app)
    schedules = [
        hashcron("H H * * *", **options).placed(offsets)
        for options in ({}, {"tz": "Europe/Paris"}, {"day_and": True}, {"key": "k"})
        for offsets in ((0, 0), (7, 3), (59, 23))
    ]
    for name in ("a", "b", "report-9"):
        for schedule in schedules:
            fresh = SharedSlots(app).source(name, schedule, False)
            assert described(warm.source(name, schedule, False)) == described(fresh)


def test_placed_schedules_differ_by_offsets_zone_and_day_rule(app: Celery) -> None:
    shared = SharedSlots(app)
    base = hashcron("H H 1 * 1")
    sources = [
        shared.source("a", schedule.placed(offsets), False)
        for schedule in (
            base,
            hashcron("H H 1 * 1", tz="Asia/Tokyo"),
            hashcron("H H 1 * 1", day_and=True),
        )
        for offsets in ((5, 1), (6, 1))
    ]
    assert len({id(source) for source in sources}) == len(sources)
    assert shared.source("b", base.placed((5, 1)), False) is sources[0]
    assert described(sources[0])[0].startswith("5 1 ")


def test_a_placed_schedule_is_not_the_hashed_one(app: Celery) -> None:
    shared = SharedSlots(app)
    hashed = shared.source("a", hashcron("H * * * *"), False)
    minute = int(described(hashed)[0].split()[0])
    placed = shared.source("a", hashcron("H * * * *").placed(((minute + 1) % 60,)), False)
    assert int(described(placed)[0].split()[0]) == (minute + 1) % 60
    assert shared.source("a", hashcron("H * * * *"), False) is hashed
