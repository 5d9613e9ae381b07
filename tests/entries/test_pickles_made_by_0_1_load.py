"""Schedules pickled by celery_hashbeat 0.1 load with today's code, as the same schedules.

Celery's own shelve file holds pickled schedules when hashcron runs under Celery's scheduler, and
a pickle names the class by its module: ``celery_hashbeat.schedules.hashcron``. The bytes below
were made by 0.1 (commit cb3060d) with ``pickle.dumps(schedule, protocol=4)``; beside each are the
first three slots 0.1 gave after 2030-01-01T00:00:00Z. Moving or renaming the classes, or changing
what their pickles restore, fails here.
"""

from __future__ import annotations

import base64
import pickle
from datetime import timedelta

import pytest

from celery_hashbeat.schedules import HashSchedule, hashcron, hashinterval

#: 2030-01-01T00:00:00Z, in epoch milliseconds.
T0 = 1_893_456_000_000

#: name -> (what 0.1 pickled, written with today's code; the pickle 0.1 made; 0.1's next slots).
MADE_BY_0_1: dict[str, tuple[HashSchedule, str, list[int]]] = {
    "hourly": (
        hashcron("H * * * *", key="nightly-report", tz="UTC"),
        "gASVZAAAAAAAAACMGWNlbGVyeV9oYXNoYmVhdC5zY2hlZHVsZXOUjAhoYXNoY3JvbpSTlCiMCUggKiAqICogKpSMDm5p"
        "Z2h0bHktcmVwb3J0lIwDVVRDlIlOTnSUUpR9lIwHb2Zmc2V0c5ROc2Iu",
        [1_893_457_560_000, 1_893_461_160_000, 1_893_464_760_000],
    ),
    "zone-day-and-balanced": (
        hashcron(
            "H H(6-9) * * 1-5", key="shop.refresh", tz="Europe/Paris", day_and=True, balanced=True
        ),
        "gASVcgAAAAAAAACMGWNlbGVyeV9oYXNoYmVhdC5zY2hlZHVsZXOUjAhoYXNoY3JvbpSTlCiMEEggSCg2LTkpICogKiAx"
        "LTWUjAxzaG9wLnJlZnJlc2iUjAxFdXJvcGUvUGFyaXOUiE6IdJRSlH2UjAdvZmZzZXRzlE5zYi4=",
        [1_893_475_560_000, 1_893_561_960_000, 1_893_648_360_000],
    ),
    "placed-by-the-balancer": (
        hashcron("H * * * *", key="placed", tz="UTC").placed((17,)),
        "gASVXwAAAAAAAACMGWNlbGVyeV9oYXNoYmVhdC5zY2hlZHVsZXOUjAhoYXNoY3JvbpSTlCiMCUggKiAqICogKpSMBnBs"
        "YWNlZJSMA1VUQ5SJTk50lFKUfZSMB29mZnNldHOUSxGFlHNiLg==",
        [1_893_457_020_000, 1_893_460_620_000, 1_893_464_220_000],
    ),
    "unkeyed": (
        hashcron("H * * * *", tz="UTC"),
        "gASVVAAAAAAAAACMGWNlbGVyeV9oYXNoYmVhdC5zY2hlZHVsZXOUjAhoYXNoY3JvbpSTlCiMCUggKiAqICogKpROjANV"
        "VEOUiU5OdJRSlH2UjAdvZmZzZXRzlE5zYi4=",
        [1_893_458_280_000, 1_893_461_880_000, 1_893_465_480_000],  # bound to "bound-later"
    ),
    "interval-in-seconds": (
        hashinterval(90, key="sync"),
        "gASVXAAAAAAAAACMGWNlbGVyeV9oYXNoYmVhdC5zY2hlZHVsZXOUjAxoYXNoaW50ZXJ2YWyUk5SMCGRhdGV0aW1llIwJ"
        "dGltZWRlbHRhlJOUSwBLWksAh5RSlIwEc3luY5SGlFKULg==",
        [1_893_456_010_471, 1_893_456_100_471, 1_893_456_190_471],
    ),
    "interval-as-timedelta": (
        hashinterval(timedelta(minutes=5), key="inventory"),
        "gASVYgAAAAAAAACMGWNlbGVyeV9oYXNoYmVhdC5zY2hlZHVsZXOUjAxoYXNoaW50ZXJ2YWyUk5SMCGRhdGV0aW1llIwJ"
        "dGltZWRlbHRhlJOUSwBNLAFLAIeUUpSMCWludmVudG9yeZSGlFKULg==",
        [1_893_456_026_795, 1_893_456_326_795, 1_893_456_626_795],
    ),
}


def next_slots(schedule: HashSchedule, count: int = 3) -> list[int]:
    """The first ``count`` slots after T0; an unkeyed schedule keyed as a beat would key it."""
    keyed = schedule if schedule.key is not None else schedule.bound("bound-later")
    found, after = [], T0
    for _ in range(count):
        after = keyed.next_slot(after)
        found.append(after)
    return found


@pytest.mark.parametrize("name", list(MADE_BY_0_1))
def test_a_pickle_made_by_0_1_loads_as_the_same_schedule(name: str) -> None:
    today, pickled, slots_in_0_1 = MADE_BY_0_1[name]
    loaded = pickle.loads(base64.b64decode(pickled))
    assert type(loaded) is type(today)
    assert type(loaded).__module__ == "celery_hashbeat.schedules"
    assert loaded == today
    assert next_slots(loaded) == next_slots(today) == slots_in_0_1


def test_a_pickle_made_by_0_1_keeps_the_balancers_placement() -> None:
    today, pickled, _ = MADE_BY_0_1["placed-by-the-balancer"]
    loaded = pickle.loads(base64.b64decode(pickled))
    assert loaded.offsets == (17,)
    # Minute 17, not the minute "placed" hashes to: the placement, not the hash, decides.
    unplaced = hashcron("H * * * *", key="placed", tz="UTC")
    assert next_slots(loaded)[0] == T0 + 17 * 60_000 != next_slots(unplaced)[0]
    assert loaded == today != unplaced
