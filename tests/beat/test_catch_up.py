"""The catch-up policy (``catch_up``: latest, all or skip; ``catch_up_window`` and Celery's
``beat_cron_starting_deadline`` as windows): which missed slots a beat sends after a take-over, a
clock jump or an outage, and that a changed schedule is never caught up into the past. In-process
schedulers against the real Redis (store and broker) on a clock the tests move, and the policy
itself checked against a brute-force walk.

Elsewhere, because they need more than this: the ``missed`` history record and metric with real
beats (tests/observe/test_beat_http.py); ``ScheduleAdmin.resume(catch_up=True)`` (tests/control);
catch_up="all" losing nothing under real faults with real beats and workers (tests/chaos) and
real workers running what the beat caught up (tests/worker); and the slot arithmetic that lists
a long backlog for catch_up="all" (tests/entries/test_slot_arithmetic.py)."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from celery import Celery
from celery.schedules import crontab
from hypothesis import given
from hypothesis import strategies as st

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.entries.entry import ALL_CAP, Entry
from celery_hashbeat.expr.slots import IntervalSlots, Slots
from celery_hashbeat.publish.message import slot_iso
from tests.entries.test_slot_arithmetic import brute
from tests.support.beat_fixtures import (
    MINUTE,
    START,
    Broker,
    Clock,
    Make,
    drain,
    iso,
    ticks,
)

HOUR = 60 * MINUTE


def step(scheduler: Scheduler, clock: Clock, seconds: float) -> None:
    clock.advance(seconds)
    drain(scheduler)


# The policy, against brute force ------------------------------------------------------------------


def entry(source: Slots, catch_up: str, window: int | None) -> Entry:
    return Entry("e", "t", None, source, (), {}, {}, False, catch_up, window)


@given(
    st.integers(1, 50),
    st.integers(0, 10_000),
    st.integers(0, 20_000),
    st.sampled_from(["latest", "all", "skip"]),
    st.none() | st.integers(0, 5_000),
)
def test_catch_up_keeps_what_the_policy_says(
    period: int, fence: int, gap: int, mode: str, window: int | None
) -> None:
    source = IntervalSlots(period, 0)
    now = fence + gap
    missed = brute(source, fence, now)
    if window is not None:
        missed = [slot for slot in missed if slot >= now - window]
    expected = {"latest": missed[-1:], "all": missed[-ALL_CAP:], "skip": []}[mode]

    planned = entry(source, mode, window)
    planned.start(fence, now)
    fired = []
    while planned.slot is not None and planned.slot <= now:
        fired.append(planned.slot)
        planned.advance(planned.slot, now)
    assert fired == expected
    assert planned.slot == source.next_after(now)


def test_a_new_entry_waits_for_its_next_slot() -> None:
    planned = entry(IntervalSlots(1000, 250), "all", None)
    planned.start(None, START + 5_000)
    assert planned.slot == START + 5_250


# After a take-over, a clock jump and a changed schedule -------------------------------------------


def test_catch_up_modes_after_a_takeover(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    every_minute = hashcron("* * * * *")
    app.conf.beat_schedule = {
        name: {"task": "t", "schedule": every_minute, **extra}
        for name, extra in {
            "latest": {},
            "all": {"catch_up": "all"},
            "skip": {"catch_up": "skip"},
            "window": {"catch_up": "all", "catch_up_window": 150},
            "seconds": {"schedule": hashcron("* * * * * *"), "catch_up": "all"},
        }.items()
    }
    first = schedulers(clock)
    ticks(first)
    clock.advance(60)
    drain(first)
    assert {entry for entry, _ in broker.slots()} >= {"latest", "all", "skip", "window"}
    first.close()  # a clean stop releases the lease
    broker.new()

    clock.advance(600)  # ten minutes with no beat at all
    app.conf.beat_schedule["fresh"] = {"task": "t", "schedule": every_minute, "catch_up": "all"}
    second = schedulers(clock)
    drain(second)
    assert second.is_leader
    fired: dict[str, list[str]] = {}
    for headers in broker.new():
        fired.setdefault(headers["hashbeat_entry"], []).append(headers["hashbeat_slot"])
    now = START + 660_000
    assert fired["latest"] == [iso(now)]
    assert fired["all"] == [iso(now - k * MINUTE) for k in range(9, -1, -1)]
    assert "skip" not in fired and "fresh" not in fired
    assert fired["window"] == [iso(now - 2 * MINUTE), iso(now - MINUTE), iso(now)]
    assert fired["seconds"] == [iso(now - k * 1000) for k in range(99, -1, -1)]  # capped at 100

    clock.advance(60)
    drain(second)
    assert Counter(h["hashbeat_entry"] for h in broker.new()) == dict.fromkeys(
        ["latest", "all", "skip", "window", "fresh"], 1
    ) | {"seconds": 60}


def test_a_leader_living_through_a_clock_jump_applies_the_catch_up_policy(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    """Wall time leaps forward while one beat stays leader (a VM resumed, NTP stepping): the
    overdue slots go through the same policy as after a takeover, and "all" stays capped."""
    every_second = hashcron("* * * * * *")
    app.conf.beat_schedule = {
        name: {"task": "t", "schedule": every_second, "catch_up": name}
        for name in ("latest", "all", "skip")
    }
    beat = schedulers(clock)
    ticks(beat)
    clock.advance(2)
    drain(beat)
    assert beat.is_leader
    broker.new()

    clock.advance(300)  # 300 slots pass without a tick
    drain(beat)
    fired: dict[str, list[str]] = {}
    for headers in broker.new():
        fired.setdefault(headers["hashbeat_entry"], []).append(headers["hashbeat_slot"])
    now = START + 302_000
    assert fired["latest"] == [iso(now)]
    assert fired["all"] == [iso(now - k * 1000) for k in range(99, -1, -1)]
    assert "skip" not in fired


@pytest.mark.parametrize("changed", [False, True])
def test_a_changed_schedule_is_not_caught_up_into_the_past(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, changed: bool
) -> None:
    app.conf.hashbeat_catch_up = "all"
    app.conf.beat_schedule = {"e": {"task": "t", "schedule": hashcron("*/10 * * * *")}}
    beat = schedulers(clock)
    ticks(beat)
    clock.advance(600)
    drain(beat)
    assert broker.slots("e") == [("e", iso(START + 600_000))]
    beat.close()
    # Every beat is down for half an hour; they come back with (or without) a new schedule.
    clock.advance(1800)
    if changed:
        app.conf.beat_schedule = {"e": {"task": "t", "schedule": hashcron("* * * * *")}}
    broker.new()
    beat = schedulers(clock)
    drain(beat)
    caught_up = [slot for _, slot in broker.slots("e")][1:]
    if changed:  # nothing back-dated: the new schedule starts at its next slot after now
        assert caught_up == []
        clock.advance(60)
        drain(beat)
        assert [slot for _, slot in broker.slots("e")][1:] == [iso(START + 2_460_000)]
    else:  # unchanged: the missed slots are caught up, as catch_up="all" promises
        assert caught_up == [iso(START + 600_000 * k) for k in (2, 3, 4)]


# Celery's beat_cron_starting_deadline, a window for crontab entries -------------------------------


def test_beat_cron_starting_deadline_drops_a_stale_crontab_run_after_an_outage(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_cron_starting_deadline = 600
    app.conf.beat_schedule = {
        "cron": {"task": "shop.cron", "schedule": crontab(minute=0)},
        "hashed": {"task": "shop.hashed", "schedule": hashcron("0 * * * *")},
    }
    first = schedulers(clock)
    ticks(first)
    step(first, clock, 3600)  # 01:00 goes out
    first.close()
    clock.advance(3600 + 1800)  # no beat from 01:00 to 02:30: the 02:00 run is 30 min old
    second = schedulers(clock)
    ticks(second)
    step(second, clock, 1800)  # 03:00
    assert [slot for _, slot in broker.slots("cron")] == [
        slot_iso(START + HOUR),
        slot_iso(START + 3 * HOUR),
    ]
    # Celery's deadline is for crontab entries; others keep hashbeat_catch_up_window (none).
    assert [slot for _, slot in broker.slots("hashed")] == [
        slot_iso(START + HOUR),
        slot_iso(START + 2 * HOUR),
        slot_iso(START + 3 * HOUR),
    ]


def test_a_crontab_run_within_the_deadline_is_caught_up(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_cron_starting_deadline = 3600
    app.conf.beat_schedule = {"cron": {"task": "shop.cron", "schedule": crontab(minute=0)}}
    first = schedulers(clock)
    ticks(first)
    step(first, clock, 3600)
    first.close()
    clock.advance(3600 + 1800)
    second = schedulers(clock)
    ticks(second)
    assert [slot for _, slot in broker.slots("cron")] == [
        slot_iso(START + HOUR),
        slot_iso(START + 2 * HOUR),
    ]


def test_a_deadline_and_a_catch_up_window_that_disagree_are_said_once_at_start(
    app: Celery, clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    app.conf.update(beat_cron_starting_deadline=600, hashbeat_catch_up_window=3600)
    app.conf.beat_schedule = {"cron": {"task": "shop.cron", "schedule": crontab(minute=0)}}
    with caplog.at_level(logging.WARNING, logger="celery_hashbeat"):
        beat = schedulers(clock)
    warned = [r.getMessage() for r in caplog.records if "beat_cron_starting_deadline" in r.msg]
    assert len(warned) == 1 and "crontab entries use the tighter, 600s" in warned[0]
    assert beat.entries["cron"].window == 600_000
