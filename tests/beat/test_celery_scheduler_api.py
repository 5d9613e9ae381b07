"""Issue 23, item 17: Celery's Scheduler API as code written against celery.beat uses it. A
schedule object put in place of an equal one is the one asked (its ``is_due`` gate counts),
a beat setting that does nothing here says so, ``close`` runs ``sync`` and always stops the
beat's helpers, and ``add`` takes ScheduleEntry's keywords."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from celery import Celery
from celery.schedules import schedstate, schedule

from celery_hashbeat import Scheduler
from celery_hashbeat.publish.message import slot_iso
from tests.support.beat_fixtures import START, T0, Broker, Clock, drain, ticks
from tests.support.processes import wait_until

Make = Callable[..., Scheduler]
MINUTE = 60_000


class Switch(schedule):
    """An interval with an is_due gate held by the instance: closed, it says "not due". Two of
    them with the same interval compare equal (Celery compares ``run_every`` only)."""

    def __init__(self, run_every: timedelta, closed: bool) -> None:
        super().__init__(run_every)
        self.closed = closed

    def is_due(self, last_run_at: datetime) -> schedstate:
        if self.closed:
            return schedstate(False, 60.0)
        return super().is_due(last_run_at)


def gated(closed: bool) -> dict[str, Any]:
    return {"gated": {"task": "shop.gated", "schedule": Switch(timedelta(minutes=1), closed)}}


def step(beat: Scheduler, clock: Clock, seconds: float) -> None:
    clock.advance(seconds)
    drain(beat)


@pytest.mark.parametrize("how", ["update_from_dict", "merge_inplace"])
def test_an_equal_schedule_object_with_another_gate_replaces_the_old_one(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, how: str
) -> None:
    app.conf.beat_schedule = gated(closed=False)
    beat = schedulers(clock)
    ticks(beat)
    step(beat, clock, 60)
    assert broker.slots("gated") == [("gated", slot_iso(START + MINUTE))]
    closed = gated(closed=True)
    getattr(beat, how)(closed)
    assert beat.schedule["gated"].schedule is closed["gated"]["schedule"]
    step(beat, clock, 60)
    step(beat, clock, 60)
    assert len(broker.slots("gated")) == 1  # the new gate holds
    getattr(beat, how)(gated(closed=False))
    step(beat, clock, 60)
    assert broker.slots("gated")[-1] == ("gated", slot_iso(START + 4 * MINUTE))


def test_beat_sync_every_is_said_to_have_no_effect_once(
    app: Celery, clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    app.conf.beat_sync_every = 5
    with caplog.at_level(logging.INFO, logger="celery_hashbeat"):
        schedulers(clock)
    said = [r.getMessage() for r in caplog.records if "beat_sync_every" in r.getMessage()]
    assert len(said) == 1, said
    assert "beat_sync_every=5 has no effect" in said[0]


def test_nothing_is_said_of_beat_sync_every_left_as_it_is(
    clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="celery_hashbeat"):
        schedulers(clock)
    assert not [r for r in caplog.records if "beat_sync_every" in r.getMessage()]


class FailingSync(Scheduler):
    """A subclass whose ``sync`` (which Celery's ``close`` calls) raises."""

    synced = 0

    def sync(self) -> None:
        self.synced += 1
        raise RuntimeError("the audit table is gone")


def helpers() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("hashbeat-")}


def test_close_runs_sync_and_stops_every_helper_even_when_sync_raises(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"minute": {"task": "shop.minute", "schedule": 60.0}}
    before = helpers()
    beat = FailingSync(app, lazy=True)
    beat.clock = clock
    beat.setup_schedule()
    ticks(beat)
    step(beat, clock, 60)
    assert beat.is_leader and broker.slots("minute")
    assert helpers() - before  # the store's and the broker's helper threads
    with pytest.raises(RuntimeError, match="audit table"):
        beat.close()
    assert beat.synced == 1
    assert wait_until(lambda: not helpers() - before, 5), helpers() - before
    # The lease was released too: another beat leads at once, not when the lease runs out.
    other = schedulers(clock)
    ticks(other)
    assert other.is_leader


def test_add_takes_schedule_entry_keywords(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    beat = schedulers(clock)
    ticks(beat)
    last = datetime.fromtimestamp(T0 - 30, tz=timezone.utc)
    entry = beat.add(
        name="added",
        task="shop.added",
        schedule=timedelta(minutes=1),
        args=(1,),
        kwargs={},
        options={},
        relative=False,
        last_run_at=last,
        total_run_count=4,
        app=app,
    )
    assert beat.schedule["added"] is entry
    assert entry.last_run_at == last
    assert entry.total_run_count == 4
    step(beat, clock, 60)
    assert broker.slots("added") == [("added", slot_iso(START + MINUTE))]
    assert entry.total_run_count == 5
    with pytest.raises(Exception, match="unknown keys \\['colour'\\]"):
        beat.add(name="odd", task="shop.odd", schedule=60.0, colour="red")


def test_redbeats_start_receiver_leaves_this_beat_alone(clock: Clock, schedulers: Make) -> None:
    """RedBeat connects a beat_init receiver wherever redbeat.schedulers is imported (Sentry's
    Celery integration imports it): run on this beat, it must not raise."""
    redbeat = pytest.importorskip("redbeat.schedulers", reason="celery-redbeat is not installed")
    beat = schedulers(clock)
    redbeat.acquire_distributed_beat_lock(sender=SimpleNamespace(scheduler=beat))
    assert beat.lock_key is None
