"""The controls' poll (a store round trip every POLL_S) is made before a slot rather than with
it: polled at a slot's instant, it goes first and makes every slot of that instant late, and
it then stays on the whole seconds where most slots fall (issue 28: p99 lateness of 10,000
``H * * * * *`` entries). A pause read before the slot still holds the slot back."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.beat import leadership
from celery_hashbeat.control import polling
from celery_hashbeat.control.admin import ScheduleAdmin
from tests.support.beat_fixtures import Broker, Clock, Make, drain


@pytest.fixture(autouse=True)
def wide_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's clock jumps, the monotonic time the poll is due by does not: a loaded machine
    may spend tens of real milliseconds before the poll is weighed, which the 20 ms margin
    would count against it."""
    monkeypatch.setattr(leadership, "POLL_NEAR_MS", 80)


def recording(name: str, method: Callable[..., Any], calls: list[str]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return method(*args, **kwargs)

    return call


def test_a_poll_due_at_the_next_slot_is_made_before_it(
    app: Celery, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"every-second": {"task": "t", "schedule": hashcron("* * * * * *")}}
    beat = schedulers(clock)
    drain(beat)
    assert beat.leadership.lease.leader
    store = beat.store_calls.store
    calls: list[str] = []
    for name in ("claim", "changes"):
        setattr(store, name, recording(name, getattr(store, name), calls))
    clock.advance(0.9)  # 100 ms before the next slot, the poll falls due at the slot itself
    beat.leadership.controls.due_s = time.monotonic() + 0.1
    beat.tick()
    assert calls == ["changes"], "the poll was not made ahead of the slot"
    clock.advance(0.1)
    beat.tick()
    assert calls == ["changes", "claim"], "the slot waited for a poll"


def test_a_pause_read_ahead_of_the_slot_holds_it_back(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"every-second": {"task": "t", "schedule": hashcron("* * * * * *")}}
    beat = schedulers(clock)
    drain(beat)
    broker.new()
    admin = ScheduleAdmin(app)
    try:
        admin.pause("every-second", reason="maintenance")
    finally:
        admin.close()
    clock.advance(0.9)
    beat.leadership.controls.due_s = time.monotonic() + 0.1
    beat.tick()
    clock.advance(0.1)
    drain(beat)
    sent = [(h["hashbeat_slot"]) for h in broker.new()]
    assert sent == [], sent


def test_ticks_before_a_slot_a_poll_period_away_poll_no_more_than_usual(
    app: Celery, clock: Clock, schedulers: Make
) -> None:
    """Polled early, the next poll falls a period later: with the slot that far away, it
    would be near the slot again at once, and every tick would poll (an idle tick cost a store
    round trip in beat_tick.py)."""
    app.conf.beat_schedule = {"every-minute": {"task": "t", "schedule": hashcron("* * * * *")}}
    beat = schedulers(clock)
    drain(beat)
    store = beat.store_calls.store
    calls: list[str] = []
    setattr(store, "changes", recording("changes", store.changes, calls))  # noqa: B010
    slot_away_s = polling.POLL_S  # the next slot one poll period away, the clock held there
    clock.advance(60 - slot_away_s)
    beat.leadership.controls.due_s = time.monotonic() + slot_away_s
    for _ in range(50):
        beat.tick()
    assert len(calls) <= 1, f"{len(calls)} polls in 50 ticks"
