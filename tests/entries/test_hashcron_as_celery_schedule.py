"""hashcron and hashinterval as Celery schedules: their API, keys, time zones, pickling."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from celery import Celery
from celery.beat import ScheduleEntry
from celery.schedules import BaseSchedule

from celery_hashbeat import CronSyntaxError, hashcron, hashinterval, parse
from celery_hashbeat.entries.sharing import SharedSlots
from celery_hashbeat.expr.seeding import draw
from celery_hashbeat.expr.slots import to_ms

UTC = timezone.utc


def at(*fields: int, tz: timezone | ZoneInfo = UTC) -> datetime:
    return datetime(*fields, tzinfo=tz)  # type: ignore[misc]


@pytest.fixture
def utc_app() -> Celery:
    return Celery("schedules", set_as_current=False, config_source={"timezone": "UTC"})


def frozen(now: datetime) -> object:
    return lambda: now


def test_hashcron_is_a_celery_schedule_keyed_by_its_key(utc_app: Celery) -> None:
    schedule = hashcron("H * * * *", key="refresh-prices", app=utc_app)
    assert isinstance(schedule, BaseSchedule)
    minute = parse("H * * * *", "refresh-prices").next(at(2030, 1, 1)).minute
    assert schedule.next_slot(to_ms(at(2030, 1, 1))) == to_ms(at(2030, 1, 1, 0, minute))


def test_is_due_and_remaining_estimate_follow_the_slots(utc_app: Celery) -> None:
    now = at(2030, 1, 1, 12, 0, 30)
    schedule = hashcron("*/5 * * * * *", app=utc_app, nowfun=frozen(now))
    # Last run at 12:00:20: the slot 12:00:25 has passed, so it is due; next check at 12:00:35.
    assert tuple(schedule.is_due(at(2030, 1, 1, 12, 0, 20))) == (True, 5.0)
    # Last run at 12:00:30: the next slot is 12:00:35, five seconds away.
    assert tuple(schedule.is_due(now)) == (False, 5.0)
    assert schedule.remaining_estimate(now) == timedelta(seconds=5)
    assert schedule.remaining_estimate(at(2030, 1, 1, 12, 0, 20)) == timedelta(seconds=-5)


def test_runs_under_celerys_own_scheduler_entry(utc_app: Celery) -> None:
    entry = ScheduleEntry(
        name="e",
        task="t",
        schedule=hashcron("0 * * * *", app=utc_app, nowfun=frozen(at(2030, 1, 1, 12, 30))),
        last_run_at=at(2030, 1, 1, 11, 59),
        app=utc_app,
    )
    assert entry.is_due() == (True, 1800.0)


def test_unkeyed_hash_fails_at_first_use_not_at_construction(utc_app: Celery) -> None:
    schedule = hashcron("H * * * *", app=utc_app)  # declaring it is fine
    with pytest.raises(CronSyntaxError, match="key"):
        schedule.remaining_estimate(at(2030, 1, 1))
    # An expression without hash terms needs no key.
    assert hashcron("30 * * * *", app=utc_app).next_slot(0) == 30 * 60_000


def test_malformed_expression_fails_at_first_use(utc_app: Celery) -> None:
    schedule = hashcron("61 * * * *", key="k", app=utc_app)
    with pytest.raises(CronSyntaxError, match="out of range"):
        schedule.next_slot(0)


def test_bound_keys_an_unkeyed_schedule_and_keeps_an_explicit_key(utc_app: Celery) -> None:
    unkeyed = hashcron("H H * * *", app=utc_app)
    bound = unkeyed.bound("nightly")
    assert bound.key == "nightly" and unkeyed.key is None
    assert bound == hashcron("H H * * *", key="nightly")
    explicit = hashcron("H H * * *", key="mine", app=utc_app)
    assert explicit.bound("nightly") is explicit


def test_time_zone_from_the_schedule_or_the_app() -> None:
    tokyo = Celery("tokyo", set_as_current=False, config_source={"timezone": "Asia/Tokyo"})
    noon = hashcron("0 12 * * *", app=tokyo)
    assert noon.next_slot(to_ms(at(2030, 1, 1))) == to_ms(at(2030, 1, 1, 3))
    new_york = hashcron("0 12 * * *", tz="America/New_York", app=tokyo)
    assert new_york.next_slot(to_ms(at(2030, 1, 1))) == to_ms(at(2030, 1, 1, 17))
    summer = hashcron("0 12 * * *", tz=ZoneInfo("America/New_York"), app=tokyo)
    assert summer.next_slot(to_ms(at(2030, 7, 1))) == to_ms(at(2030, 7, 1, 16))


def test_day_and_asks_both_day_fields(utc_app: Celery) -> None:
    # 2030-01-01 is a Tuesday. Either field matching: the 15th or any Monday (Jan 7).
    either = hashcron("0 0 15 * 1", app=utc_app)
    both = hashcron("0 0 15 * 1", day_and=True, app=utc_app)
    assert either.next_slot(to_ms(at(2030, 1, 1))) == to_ms(at(2030, 1, 7))
    assert both.next_slot(to_ms(at(2030, 1, 1))) == to_ms(at(2030, 4, 15))


def test_equality_hash_and_repr() -> None:
    a = hashcron("H * * * *", key="k", tz="Europe/Paris", day_and=True)
    assert a == hashcron("H * * * *", key="k", tz="Europe/Paris", day_and=True)
    assert hash(a) == hash(hashcron("H * * * *", key="k", tz="Europe/Paris", day_and=True))
    assert a != hashcron("H * * * *", key="other", tz="Europe/Paris", day_and=True)
    assert a != hashcron("H * * * *", key="k", tz="Europe/Paris")
    assert hashcron("H * * * *") != hashinterval(60)
    assert repr(a) == "hashcron('H * * * *', key='k', tz='Europe/Paris', day_and=True)"
    assert repr(hashcron("@daily")) == "hashcron('@daily')"
    assert hashinterval(60, key="k") == hashinterval(timedelta(minutes=1), key="k")
    assert hash(hashinterval(60, key="k")) == hash(hashinterval(timedelta(minutes=1), key="k"))
    assert hashinterval(60, key="k") != hashinterval(60, key="j")
    assert repr(hashinterval(90, key=7)) == "hashinterval(90.0, key=7)"


@pytest.mark.parametrize(
    "schedule",
    [
        hashcron("H/10 * * * * *", key="k", tz=ZoneInfo("Europe/Paris"), day_and=True),
        hashcron("@midnight"),
        hashinterval(timedelta(milliseconds=1500), key=b"raw"),
    ],
)
def test_pickles(schedule: hashcron | hashinterval, utc_app: Celery) -> None:
    copy = pickle.loads(pickle.dumps(schedule))
    assert copy == schedule and type(copy) is type(schedule)
    keyed = schedule.bound("entry")
    keyed.app = utc_app
    restored = pickle.loads(pickle.dumps(keyed))
    restored.app = utc_app
    assert restored.next_slot(1_893_456_000_123) == keyed.next_slot(1_893_456_000_123)


def test_hashinterval_offset_is_drawn_from_the_key() -> None:
    period = 300_000
    offset = draw("poll-feeds", "interval", 0) % period
    schedule = hashinterval(300, key="poll-feeds")
    assert schedule.next_slot(-1) == offset
    assert schedule.next_slot(offset) == offset + period
    assert schedule.next_slot(10 * period) == 10 * period + offset
    assert schedule.next_slot(10 * period + offset - 1) == 10 * period + offset


def test_hashinterval_has_millisecond_resolution_and_spreads_keys() -> None:
    offsets = {hashinterval(1.5, key=f"entry-{i}").next_slot(-1) for i in range(200)}
    assert all(0 <= offset < 1500 for offset in offsets)
    assert len(offsets) > 150  # 200 keys over 1,500 ms: collisions are rare
    assert any(offset % 1000 for offset in offsets)  # not rounded to seconds


def test_hashinterval_checks_its_period_and_key_at_first_use() -> None:
    with pytest.raises(ValueError, match="key"):
        hashinterval(60).next_slot(0)
    with pytest.raises(ValueError, match="at least 1 ms"):
        hashinterval(0.0001, key="k").next_slot(0)
    with pytest.raises(TypeError):
        hashinterval("soon", key="k")  # type: ignore[arg-type]


def test_hashinterval_is_due(utc_app: Celery) -> None:
    schedule = hashinterval(10, key="k", app=utc_app)
    offset = schedule.next_slot(-1)
    now = at(2030, 1, 1, 0, 0, 0) + timedelta(milliseconds=offset + 2500)
    schedule = hashinterval(10, key="k", app=utc_app, nowfun=frozen(now))
    assert tuple(schedule.is_due(now - timedelta(seconds=3))) == (True, 7.5)
    assert tuple(schedule.is_due(now)) == (False, 7.5)


def test_an_entry_without_a_zone_takes_the_schedulers_app_timezone() -> None:
    """Not the current app's, nor one the schedule was made with: a process may hold several
    apps (tests, Django projects), and the beat runs one of them."""
    tokyo = Celery("tokyo", set_as_current=False, config_source={"timezone": "Asia/Tokyo"})
    riga = Celery("riga", set_as_current=False, config_source={"timezone": "Europe/Riga"})
    noon = hashcron("0 12 * * *", app=tokyo)
    source = SharedSlots(riga).source("noon", noon, relative=False)
    day = int(datetime(2030, 1, 7, tzinfo=UTC).timestamp() * 1000)
    assert source.next_after(day) == day + 10 * 3600 * 1000  # 12:00 in Riga is 10:00 UTC
