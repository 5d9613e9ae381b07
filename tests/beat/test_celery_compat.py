"""Where the Scheduler behaves as celery.beat's does, for code and tools written against it
(issue 8): is_due overrides, schedules that fail at start, faithful ScheduleEntry objects, the
live ``schedule`` mapping and the send lines' logger. (beat_cron_starting_deadline, a catch-up
window, is checked in test_catch_up.py.)"""

from __future__ import annotations

import copy
import logging
import pickle
from collections.abc import Callable, MutableMapping
from datetime import datetime, timedelta
from typing import Any

import pytest
from celery import Celery
from celery.beat import ScheduleEntry
from celery.schedules import crontab, schedstate, schedule

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.publish.message import slot_iso
from tests.support.beat_fixtures import T0, Broker, Clock, run_for, ticks

Make = Callable[..., Scheduler]
MINUTE = 60_000
HOUR = 60 * MINUTE
START = int(T0 * 1000)

#: What the test schedules below read: a holiday switch and a database that may be down.
WORLD = {"holiday": False, "database_up": True}


class HolidayGate(schedule):
    """The pattern Celery's FAQ gives: a schedule that says "not due" on holidays."""

    def is_due(self, last_run_at: datetime) -> schedstate:
        if WORLD["holiday"]:
            return schedstate(False, 60.0)
        return super().is_due(last_run_at)


class NeedsDatabase(schedule):
    """A schedule that reads its interval from a database, which may not be up at start."""

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        if not WORLD["database_up"]:
            raise ConnectionError("the schedules database is not up yet")
        return super().remaining_estimate(last_run_at)

    def __reduce__(self) -> Any:
        return type(self), (self.run_every, self.relative, self.nowfun)


@pytest.fixture(autouse=True)
def _world() -> Any:
    WORLD.update(holiday=False, database_up=True)
    yield
    WORLD.update(holiday=False, database_up=True)


def drain(scheduler: Scheduler) -> None:
    for _ in range(200):
        if scheduler.tick() > 0:
            return
    raise AssertionError("the scheduler never settled")


def step(scheduler: Scheduler, clock: Clock, seconds: float) -> None:
    clock.advance(seconds)
    drain(scheduler)


# 1. is_due overrides --------------------------------------------------------------------------


def test_an_is_due_override_that_says_not_due_skips_the_slot(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    app.conf.beat_schedule = {
        "gated": {"task": "shop.gated", "schedule": HolidayGate(timedelta(minutes=1))},
        "plain": {"task": "shop.plain", "schedule": timedelta(minutes=1)},
    }
    with caplog.at_level(logging.WARNING, logger="celery_hashbeat"):
        beat = schedulers(clock)
    warned = [r.getMessage() for r in caplog.records if "is_due" in r.getMessage()]
    assert len(warned) == 1 and "'plain'" not in warned[0]
    assert "the schedule of entry 'gated' overrides is_due" in warned[0]
    ticks(beat)
    WORLD["holiday"] = True
    step(beat, clock, 60)
    step(beat, clock, 60)
    assert broker.slots("gated") == []
    assert len(broker.slots("plain")) == 2
    WORLD["holiday"] = False
    step(beat, clock, 60)
    assert broker.slots("gated") == [("gated", slot_iso(START + 3 * MINUTE))]


def test_an_is_due_override_sees_the_slot_as_now(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    seen: list[datetime] = []

    class Recorder(crontab):
        def is_due(self, last_run_at: datetime) -> schedstate:
            seen.append(self.now())
            return super().is_due(last_run_at)

    app.conf.beat_schedule = {"hourly": {"task": "shop.h", "schedule": Recorder(minute=0)}}
    beat = schedulers(clock)
    ticks(beat)
    step(beat, clock, 3600)
    assert broker.slots("hourly") == [("hourly", slot_iso(START + HOUR))]
    assert [moment.timestamp() for moment in seen] == [T0 + 3600]


# 3. a schedule that fails at start ------------------------------------------------------------


def test_a_schedule_that_fails_at_start_is_asked_again_and_runs(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    app.conf.beat_max_loop_interval = 30
    app.conf.beat_schedule = {
        "from-db": {"task": "shop.db", "schedule": NeedsDatabase(timedelta(minutes=1))}
    }
    WORLD["database_up"] = False
    with caplog.at_level(logging.WARNING, logger="celery_hashbeat"):
        beat = schedulers(clock)
        ticks(beat)
    assert "from-db" in beat.entries and "from-db" not in beat.broken
    failed = [r for r in caplog.records if "cannot compute the next slot" in r.getMessage()]
    assert failed and "'from-db'" in failed[0].getMessage()
    WORLD["database_up"] = True
    step(beat, clock, 30)  # asked again after beat_max_loop_interval: the next slot is planned
    step(beat, clock, 60)
    assert broker.slots("from-db") == [("from-db", slot_iso(START + 90_000))]


# 4. faithful ScheduleEntry objects ------------------------------------------------------------


def test_entries_are_faithful_schedule_entries(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {
        "ten": {"task": "shop.ten", "schedule": 10, "args": (1, 2)},
        "minute": {"task": "shop.minute", "schedule": timedelta(minutes=1)},
        "hashed": {"task": "shop.hashed", "schedule": hashcron("H * * * *")},
    }
    beat = schedulers(clock)
    ticks(beat)
    ten, minute, hashed = (beat.schedule[name] for name in ("ten", "minute", "hashed"))
    assert isinstance(ten.schedule, schedule) and ten.schedule.run_every == timedelta(seconds=10)
    assert isinstance(minute.schedule, schedule)
    assert isinstance(hashed.schedule, hashcron) and hashed.schedule.key == "hashed"
    for entry in (ten, minute, hashed):
        assert entry.last_run_at is not None  # before the first send, as Celery's
        due, following = beat.is_due(entry)
        assert due is False and following > 0
        clone = copy.copy(entry)
        assert isinstance(clone, Entry) and clone is not entry and clone.name == entry.name
        loaded = pickle.loads(pickle.dumps(entry))
        assert isinstance(loaded, ScheduleEntry)
        assert (loaded.name, loaded.task, loaded.schedule) == (
            entry.name,
            entry.task,
            entry.schedule,
        )
        following_entry = next(entry)
        assert following_entry.total_run_count == entry.total_run_count + 1
        assert dict(following_entry)["name"] == entry.name
    clone = copy.copy(ten)
    clone.args = (9,)
    clone.schedule = schedule(timedelta(hours=1))
    ticks(beat)
    assert beat.schedule["ten"].args == (1, 2)
    assert beat.schedule["ten"].schedule.run_every == timedelta(seconds=10)
    result = beat.apply_async(ten)
    assert result.id
    sent = [h for h in broker.headers() if h["task"] == "shop.ten"]
    assert len(sent) == 1 and sent[0]["argsrepr"] == "[1, 2]"


# 5. the live schedule mapping -----------------------------------------------------------------


def test_the_schedule_mapping_is_live(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"slow": {"task": "shop.slow", "schedule": timedelta(hours=1)}}
    beat = schedulers(clock)
    ticks(beat)
    live = beat.schedule
    assert isinstance(live, MutableMapping)
    live["added"] = {"task": "shop.added", "schedule": timedelta(minutes=1)}
    assert "added" in beat.schedule
    step(beat, clock, 60)
    assert broker.slots("added") == [("added", slot_iso(START + MINUTE))]
    # What Celery's test_ticks_schedule_change does: replace an entry's schedule in place.
    slow = beat.schedule["slow"]
    slow.total_run_count = 7  # as if it had run: the count outlives the change
    beat.schedule["slow"].schedule = schedule(timedelta(minutes=1))
    ticks(beat)
    assert beat.schedule["slow"].schedule == schedule(timedelta(minutes=1))
    assert beat.schedule["slow"].total_run_count == 7
    step(beat, clock, 60)
    assert broker.slots("slow") == [("slow", slot_iso(START + 2 * MINUTE))]
    assert beat.schedule["slow"].total_run_count == 8
    assert len(broker.slots("added")) == 2
    del live["added"]
    step(beat, clock, 60)
    assert len(broker.slots("added")) == 2 and "added" not in beat.schedule


# 6. last_run_at and total_run_count from the store ----------------------------------------------


def test_last_run_at_and_total_run_count_survive_a_restart_and_a_failover(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"minute": {"task": "shop.minute", "schedule": hashcron("* * * * *")}}
    first = schedulers(clock)
    standby = schedulers(clock)
    ticks(first, standby)
    assert first.is_leader and not standby.is_leader
    step(first, clock, 60)
    step(first, clock, 60)
    first.close()  # a failover: the standby takes over
    run_for(standby, 3, until=lambda: standby.is_leader)
    assert standby.is_leader
    entry = standby.schedule["minute"]
    assert entry.total_run_count == 2
    assert entry.last_run_at is not None
    assert entry.last_run_at.timestamp() == T0 + 120
    step(standby, clock, 60)
    assert entry.total_run_count == 3
    standby.close()
    leader = schedulers(clock)  # a restart
    ticks(leader)
    entry = leader.schedule["minute"]
    assert entry.total_run_count == 3
    assert entry.last_run_at is not None and entry.last_run_at.timestamp() == T0 + 180
    step(leader, clock, 60)
    assert len(broker.slots("minute")) == 4
    restarted_standby = schedulers(clock)  # a beat that comes back as a standby knows too
    ticks(restarted_standby)
    assert not restarted_standby.is_leader
    assert restarted_standby.schedule["minute"].total_run_count == 4
    last = restarted_standby.schedule["minute"].last_run_at
    assert last is not None and last.timestamp() == T0 + 240


# 7. the send lines come from celery.beat -------------------------------------------------------


def test_send_lines_come_from_celery_beat_and_can_be_silenced_there(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    app.conf.beat_schedule = {"minute": {"task": "shop.minute", "schedule": hashcron("* * * * *")}}
    caplog.set_level(logging.INFO)
    beat = schedulers(clock)
    ticks(beat)
    step(beat, clock, 60)
    sends = [r for r in caplog.records if "Sending due task" in r.getMessage()]
    assert [r.name for r in sends] == ["celery.beat"]
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="celery.beat")
    step(beat, clock, 60)
    assert len(broker.slots("minute")) == 2
    assert not [r for r in caplog.records if "Sending due task" in r.getMessage()]
