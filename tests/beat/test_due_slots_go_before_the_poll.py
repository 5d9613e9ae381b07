"""A slot due at the instant the controls' poll (or a renewal) is due is claimed first: the poll
is a store round trip, and once it falls on a whole second it stays there, making every slot of
those seconds that much later (issue 28: p99 lateness of 10,000 ``H * * * * *`` entries)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Celery

from celery_hashbeat import hashcron
from tests.support.beat_fixtures import Clock, Make, drain


def recording(name: str, method: Callable[..., Any], calls: list[str]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return method(*args, **kwargs)

    return call


def test_a_due_slot_is_claimed_before_the_controls_poll_of_the_same_tick(
    app: Celery, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"every-second": {"task": "t", "schedule": hashcron("* * * * * *")}}
    beat = schedulers(clock)
    drain(beat)
    assert beat.leadership.lease.leader
    store = beat.store_calls.store
    calls: list[str] = []
    for name in ("claim", "changes", "renew"):
        setattr(store, name, recording(name, getattr(store, name), calls))
    clock.advance(1)
    beat.leadership.controls.due_s = 0.0  # the poll falls due at the slot's instant
    beat.tick()
    assert "claim" in calls and "changes" in calls, calls
    assert calls.index("claim") < calls.index("changes"), calls
