"""The balancer makes each member's placed schedule from a template shared by the members whose
schedules are alike (entries/balancing.py): every member must still get its own expression, key,
zone and exclusions at its own offsets, and a balancer that saw entries come, go and change must
hand out what a fresh one does."""

from __future__ import annotations

from typing import Any

from celery_hashbeat import hashcron
from celery_hashbeat.entries.balancing import Balancer

SPELLINGS: dict[str, dict[str, Any]] = {
    "plain": {},
    "ranged": {"expr": "H(0-59) * * * *"},
    "keyed": {"key": "shared"},
    "excluding": {"exclude": ["2030-12-25"]},
    "zoned": {"tz": "UTC"},
}


def definitions(names: list[str], spelling: str = "plain") -> dict[str, Any]:
    options = dict(SPELLINGS[spelling])
    expression = options.pop("expr", "H * * * *")
    return {name: {"task": "t", "schedule": hashcron(expression, **options)} for name in names}


def shown(schedule: hashcron) -> tuple[Any, ...]:
    return (schedule.expr, schedule.key, schedule.zone, schedule.exclude, schedule.offsets)


def test_every_member_keeps_its_own_schedule_at_its_offsets() -> None:
    given: dict[str, Any] = {}
    for spelling in SPELLINGS:
        given |= definitions([f"{spelling}-{n}" for n in range(30)], spelling)
    balancer = Balancer(True, "UTC", {})
    placed = balancer.take(given)
    offsets = balancer.offsets
    assert placed.schedules.keys() == given.keys()
    for name, definition in given.items():
        schedule = definition["schedule"]
        expected = (schedule.expr, schedule.key, schedule.zone, schedule.exclude, offsets[name])
        assert shown(placed.schedules[name]) == expected
    assert len({offsets[name] for name in given}) > 40  # one group: dealt over the hour


def test_after_changes_a_warm_balancer_hands_out_what_a_fresh_one_does() -> None:
    warm = Balancer(True, "UTC", {})
    current = dict(warm.take(definitions([f"job-{n}" for n in range(120)])).schedules)
    final = definitions([f"job-{n}" for n in range(20, 120)])
    for spelling, names in (("keyed", ["job-30", "job-31"]), ("ranged", ["job-40"])):
        changed = definitions(names, spelling)
        final |= changed
        current |= warm.take(changed).schedules
    current |= warm.take(definitions(["job-50"], "zoned")).schedules
    final |= definitions(["job-50"], "zoned")
    current |= warm.drop([f"job-{n}" for n in range(20)]).schedules
    for name in range(20):
        del current[f"job-{name}"]
    fresh = Balancer(True, "UTC", {}).take(final).schedules
    assert {name: shown(schedule) for name, schedule in current.items()} == {
        name: shown(schedule) for name, schedule in fresh.items()
    }
