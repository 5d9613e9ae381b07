"""Schedules from other projects (RedBeat's rrule, custom ones) through DerivedSlots: used when
they can answer, skipped by name when they cannot answer in bounded time, never a hung beat."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from types import FrameType
from typing import Any

import pytest
from celery import Celery
from celery.schedules import BaseSchedule, schedstate

from celery_hashbeat import Scheduler
from celery_hashbeat.entries import derived
from celery_hashbeat.entries.building import build_entry
from celery_hashbeat.entries.derived import DerivedSlots, private_copy
from celery_hashbeat.entries.errors import EntryError, ScheduleTooSlow
from celery_hashbeat.entries.sharing import SharedSlots
from celery_hashbeat.expr.slots import to_datetime, to_ms
from celery_hashbeat.settings import Settings
from tests.support.beat_fixtures import T0, Broker, Clock, drain, iso, ticks

rrule = pytest.importorskip("redbeat.schedules").rrule

UTC = timezone.utc
START = int(T0 * 1000)
MINUTE = 60_000
Make = Callable[..., Scheduler]


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fail instead of hanging: SIGALRM interrupts the pure Python loop a hang is made of."""

    def expired(signum: int, frame: FrameType | None) -> None:
        raise AssertionError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def utc_app() -> Celery:
    return Celery("foreign", set_as_current=False, config_source={"timezone": "UTC"})


def build(app: Celery, schedule: Any, now: int = START) -> Any:
    definition = {"task": "t", "schedule": schedule}
    return build_entry("e", definition, Settings(), SharedSlots(app), now)


def test_an_endless_rrule_is_built_at_once_and_fires_where_dateutil_says(utc_app: Celery) -> None:
    """copy.copy of an rrule iterated the endless rule (its __reduce__ hands over the dateutil
    rule as the argument list): building the entry hung at 100% CPU."""
    given = rrule("MINUTELY", interval=7, dtstart=datetime(2029, 12, 31, 23, 0, 30), app=utc_app)
    with deadline(10):
        source = build(utc_app, given).source
        walked = [source.next_after(START)]
        for _ in range(20):
            walked.append(source.next_after(walked[-1]))
    expected = list(given.rrule.xafter(datetime(2030, 1, 1, tzinfo=UTC), count=21))
    assert walked == [to_ms(moment) for moment in expected]
    assert source.recent(START, walked[-1], 5) == walked[-5:]


def test_an_rrule_without_dtstart_is_built_at_once(utc_app: Celery) -> None:
    given = rrule("HOURLY", app=utc_app)  # starts when it is made, as in a beat_schedule
    now = to_ms(datetime.now(UTC))
    with deadline(10):
        first = build(utc_app, given, now).source.next_after(now)
    assert to_ms(given.dtstart) <= first <= now + 3_600_000


def test_an_rrule_that_ended_is_skipped_by_name(utc_app: Celery) -> None:
    given = rrule("DAILY", count=3, dtstart=datetime(2029, 1, 1), app=utc_app)
    with deadline(10), pytest.raises(EntryError, match=r"entry 'e': .* has no slot after 2030"):
        build(utc_app, given)


def test_an_rrule_fires_under_the_scheduler_beside_the_other_entries(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {
        "rrule": {
            "task": "t",
            "schedule": rrule("MINUTELY", interval=5, dtstart=datetime(2029, 12, 31, 23, 0, 30)),
        },
        "plain": {"task": "t", "schedule": 60},
    }
    with deadline(20):
        beat = schedulers(clock)
        ticks(beat)
        for _ in range(11):
            clock.advance(60)
            drain(beat)
    assert not beat.broken
    assert [slot for _, slot in broker.slots("rrule")] == [
        iso(START + offset) for offset in (30_000, 5 * MINUTE + 30_000, 10 * MINUTE + 30_000)
    ]
    assert len(broker.slots("plain")) == 11


class RealClock(BaseSchedule):
    """Reads the real time instead of ``self.now()``: no two beats would agree on its slots."""

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        return last_run_at + timedelta(minutes=1) - datetime.now(UTC)


class Slow(BaseSchedule):
    """Answers correctly, one minute on, but slowly."""

    delay = 0.05

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        time.sleep(self.delay)
        return last_run_at + timedelta(minutes=1) - self.now()


class Stuck(BaseSchedule):
    """Always says it is due now: the slot never moves forward."""

    def is_due(self, last_run_at: datetime) -> schedstate:
        return schedstate(True, 0)


def test_schedules_that_cannot_answer_are_skipped_by_name_with_one_line(
    app: Celery, broker: Broker, clock: Clock, schedulers: Make, caplog: pytest.LogCaptureFixture
) -> None:
    app.conf.beat_schedule = {
        "real-clock": {"task": "t", "schedule": RealClock()},
        "stuck": {"task": "t", "schedule": Stuck()},
        "ended": {"task": "t", "schedule": rrule("DAILY", count=1, dtstart=datetime(2029, 1, 1))},
        "plain": {"task": "t", "schedule": 60},
    }
    with caplog.at_level(logging.ERROR), deadline(20):
        beat = schedulers(clock)
        ticks(beat)
        clock.advance(60)
        drain(beat)
    assert set(beat.broken) == {"real-clock", "stuck", "ended"}
    lines = [record.getMessage() for record in caplog.records]
    for name, why in [
        ("real-clock", "reads the real clock"),
        ("stuck", "never moves past"),
        ("ended", "has no slot after"),
    ]:
        assert len([line for line in lines if f"'{name}'" in line and why in line]) == 1, lines
    assert all("Traceback" not in line for line in lines)
    assert broker.slots() == [("plain", iso(START + MINUTE))]


def test_a_slow_answer_refuses_the_schedule_from_then_on(
    utc_app: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(derived, "ANSWER_BUDGET", 0.01)
    with pytest.raises(EntryError, match=r"entry 'e': .*took 0\.\d s to say its next slot"):
        build(utc_app, Slow())
    source = DerivedSlots(Slow(), utc_app)
    with pytest.raises(ScheduleTooSlow):
        source.next_after(START)
    started = time.perf_counter()
    with pytest.raises(ScheduleTooSlow):
        source.next_after(START + MINUTE)  # refused without asking again
    assert time.perf_counter() - started < 0.01


def test_a_catch_up_too_slow_to_list_is_refused(
    utc_app: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = Slow()
    slow.delay = 0.002
    monkeypatch.setattr(derived, "WALK_BUDGET", 0.2)
    source = DerivedSlots(slow, utc_app)
    assert source.recent(START, START + 10 * MINUTE, 100) == [
        START + n * MINUTE for n in range(1, 11)
    ]
    started = time.perf_counter()
    with pytest.raises(ScheduleTooSlow, match="to list its missed slots"):
        source.recent(START, START + 10_000 * MINUTE, 100)
    assert time.perf_counter() - started < 1


def test_the_private_copy_never_uses_reduce_and_forgets_the_old_apps_zone() -> None:
    berlin = Celery("berlin", set_as_current=False, config_source={"timezone": "Europe/Berlin"})
    tokyo = Celery("tokyo", set_as_current=False, config_source={"timezone": "Asia/Tokyo"})
    given = rrule("DAILY", byhour=7, byminute=0, bysecond=0, app=berlin)
    assert str(given.tz) == "Europe/Berlin"  # cached on the instance
    with deadline(10):
        clone = private_copy(given)
    clone.app = tokyo
    assert str(clone.tz) == "Asia/Tokyo"
    assert clone.rrule is given.rrule and given.app is berlin
    # The rule itself stays in the zone it was made in: 07:00 Berlin.
    source = DerivedSlots(given, tokyo)
    assert to_datetime(source.next_after(START)).astimezone(berlin.timezone).hour == 7
