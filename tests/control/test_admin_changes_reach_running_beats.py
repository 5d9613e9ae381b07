"""Changing the schedule while beats run (docs/design.md §13), in-process: ScheduleAdmin writes to
the real Redis store, schedulers on a clock the test moves read it. Only the clock and the poll
interval are not real (the interval is 10 ms, and the helpers wait it out, so that every round of
ticks reads the controls)."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
import redis
from celery import Celery
from celery.utils.nodenames import worker_direct

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.refusals import AdminError, UnknownEntryError
from celery_hashbeat.entries.building import as_definition, build_entry
from celery_hashbeat.entries.sharing import SharedSlots
from celery_hashbeat.expr.slots import to_datetime
from celery_hashbeat.observe.history import decode
from celery_hashbeat.publish.message import slot_task_id
from celery_hashbeat.settings import Settings
from tests.control.fixtures import read
from tests.support.beat_fixtures import START, Broker, Clock, Make, iso, run_for

EVERY_SECOND = hashcron("* * * * * *")


def second(clock: Clock, *beats: Scheduler, seconds: float = 1) -> None:
    clock.advance(seconds)
    read(*beats)


def sent(broker: Broker) -> list[tuple[str, str]]:
    """(entry, slot or "trigger <when>") of each message published since the last call."""
    return [
        (h["hashbeat_entry"], h.get("hashbeat_slot") or f"trigger {h['hashbeat_trigger']}")
        for h in broker.new()
    ]


def test_an_added_entry_fires_at_its_next_slot_and_a_removed_one_stops(
    admin: ScheduleAdmin, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    beat = schedulers(clock)
    read(beat)
    clock.advance(0.4)
    admin.add("report", task="shop.report", schedule=EVERY_SECOND, args=[42])
    read(beat)
    assert sent(broker) == []  # never at once
    second(clock, beat, seconds=0.6)
    messages = broker.headers()
    assert sent(broker) == [("report", iso(START + 1000))]
    assert json.loads(broker.client.lrange(broker.queue, 0, 0)[0])["body"]
    assert messages[0]["id"] == slot_task_id("report", START + 1000)
    second(clock, beat)
    assert sent(broker) == [("report", iso(START + 2000))]
    admin.remove("report")
    read(beat)
    second(clock, beat, seconds=3)
    assert sent(broker) == []
    assert "report" not in beat.schedule
    assert admin.store.fences(["report"]) == {}  # re-added later, it starts afresh


def test_pause_sends_nothing_and_resume_continues_from_now_without_a_burst(
    admin: ScheduleAdmin, app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"tick": {"task": "t", "schedule": EVERY_SECOND}}
    beat = schedulers(clock)
    read(beat)
    second(clock, beat)
    assert sent(broker) == [("tick", iso(START + 1000))]
    admin.pause("tick", reason="supplier outage")  # a config entry can be paused
    second(clock, beat, seconds=5)
    assert sent(broker) == []
    view = admin.get("tick")
    assert view.paused and view.pause is not None and view.pause.reason == "supplier outage"
    clock.advance(0.5)
    admin.resume("tick")
    read(beat)
    assert sent(broker) == []
    second(clock, beat, seconds=0.5)
    # Not the latest of the five missed slots (catch_up="latest"): the first after the resume.
    assert sent(broker) == [("tick", iso(START + 7000))]
    # A standby that takes over honours the resume too: nothing from the pause is caught up.
    standby = schedulers(clock)
    read(standby)
    beat.close()
    run_for(standby, 3.0, until=lambda: standby.is_leader)
    second(clock, standby)
    assert sent(broker) == [("tick", iso(START + 8000))]
    history = [decode(text) for text in admin.store.history("tick", 10)]
    assert [r.slot for r in history if r is not None and r.reason == "paused"] == [START + 2000]


def test_resume_with_catch_up_sends_what_the_policy_keeps(
    admin: ScheduleAdmin, app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"tick": {"task": "t", "schedule": EVERY_SECOND}}
    beat = schedulers(clock)
    read(beat)
    second(clock, beat)
    broker.new()
    admin.pause("tick")
    second(clock, beat, seconds=4)
    admin.resume("tick", catch_up=True)
    read(beat)
    # catch_up="latest": the most recent missed slot, once.
    assert sent(broker) == [("tick", iso(START + 5000))]


def test_a_trigger_is_sent_once_with_its_own_id_and_leaves_the_fence_alone(
    admin: ScheduleAdmin, app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {"daily": {"task": "t", "schedule": hashcron("0 6 * * *")}}
    admin.pause("daily", reason="maintenance")  # a paused entry can still be triggered
    task_id = admin.trigger("daily")  # asked while no beat runs: kept in the store
    assert task_id != slot_task_id("daily", START)
    beat = schedulers(clock)
    standby = schedulers(clock)
    read(beat, standby)
    headers = broker.new()
    assert len(headers) == 1
    assert headers[0]["id"] == task_id
    assert headers[0]["hashbeat_trigger"] == to_datetime(START).isoformat(timespec="milliseconds")
    assert "hashbeat_slot" not in headers[0]
    read(beat, standby)
    assert broker.new() == []  # once
    assert admin.store.last_slots(["daily"]) == {}
    beat.close()  # writes the history it holds
    records = [decode(text) for text in admin.store.history("daily", 5)]
    assert [(r.outcome, r.task_id) for r in records if r is not None] == [("trigger", task_id)]


def test_an_update_applies_from_its_next_slot_with_nothing_twice_or_back_dated(
    admin: ScheduleAdmin, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    admin.add("report", task="shop.report", schedule=hashcron("*/2 * * * * *"))
    beat = schedulers(clock)
    read(beat)
    second(clock, beat, seconds=2)
    assert sent(broker) == [("report", iso(START + 2000))]
    clock.advance(0.5)
    admin.update("report", schedule=hashcron("*/3 * * * * *"))
    # The new schedule's slot START+0 and START+3000 would be back-dated: neither is sent.
    second(clock, beat, seconds=2.5)
    assert sent(broker) == [("report", iso(START + 3000))]
    second(clock, beat, seconds=3)
    assert sent(broker) == [("report", iso(START + 6000))]


def test_max_runs_counts_in_the_store_across_a_failover(
    admin: ScheduleAdmin, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    admin.add("thrice", task="shop.report", schedule=EVERY_SECOND, max_runs=3)
    beat, standby = schedulers(clock), schedulers(clock)
    read(beat, standby)
    second(clock, beat)
    second(clock, beat)
    assert len(sent(broker)) == 2
    beat.close()
    run_for(standby, 3.0, until=lambda: standby.is_leader)
    for _ in range(5):
        second(clock, standby)
    assert sent(broker) == [("thrice", iso(START + 3000))]


def test_start_and_end_bound_the_slots(
    admin: ScheduleAdmin, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    begin = to_datetime(START + 3000)
    admin.add(
        "window",
        task="shop.report",
        schedule=EVERY_SECOND,
        start=begin,
        end=begin + timedelta(seconds=2),
    )
    beat = schedulers(clock)
    read(beat)
    for _ in range(10):
        second(clock, beat)
    assert [slot for _, slot in sent(broker)] == [iso(START + s) for s in (3000, 4000, 5000)]


def test_bad_definitions_are_refused_and_change_nothing(admin: ScheduleAdmin, app: Celery) -> None:
    app.conf.beat_schedule = {"configured": {"task": "t", "schedule": EVERY_SECOND}}
    admin.add("kept", task="shop.report", schedule=EVERY_SECOND)
    before = admin.store.changes(0)
    cases = {
        "expression": {"task": "shop.report", "schedule": hashcron("H 25 * * *")},
        "task": {"task": "shop.nope", "schedule": EVERY_SECOND},
        "args": {"task": "shop.report", "schedule": EVERY_SECOND, "args": [object()]},
        "args-text": {"task": "shop.report", "schedule": EVERY_SECOND, "args": "abc"},
        "options": {"task": "shop.report", "schedule": EVERY_SECOND, "options": {"queue": 1}},
        "overlap": {"task": "shop.report", "schedule": EVERY_SECOND, "overlap": "sometimes"},
        "catch_up": {"task": "shop.report", "schedule": EVERY_SECOND, "catch_up": "most"},
        "bounds": {
            "task": "shop.report",
            "schedule": EVERY_SECOND,
            "start": to_datetime(START + 5000),
            "end": to_datetime(START),
        },
        "naive": {
            "task": "shop.report",
            "schedule": EVERY_SECOND,
            "start": to_datetime(START).replace(tzinfo=None),
        },
    }
    for what, definition in cases.items():
        with pytest.raises(AdminError) as refused:
            admin.add(f"bad-{what}", **definition)  # type: ignore[arg-type]
        assert f"bad-{what}" in str(refused.value), what
    with pytest.raises(AdminError, match="beat_schedule"):
        admin.add("configured", task="shop.report", schedule=EVERY_SECOND)
    with pytest.raises(AdminError, match="edit the configuration"):
        admin.remove("configured")
    with pytest.raises(AdminError, match="in the store already"):
        admin.add("kept", task="shop.report", schedule=EVERY_SECOND)
    with pytest.raises(UnknownEntryError):
        admin.trigger("nobody")
    with pytest.raises(AdminError):
        admin.update("kept", schedule=hashcron("61 * * * *"))
    admin.resume("kept")  # not paused: nothing to do, and nothing written
    assert admin.store.changes(0) == before


def test_a_malformed_stored_entry_is_logged_by_name_and_skipped(
    admin: ScheduleAdmin,
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    caplog: pytest.LogCaptureFixture,
) -> None:
    admin.add("good", task="shop.report", schedule=EVERY_SECOND)
    client = redis.Redis.from_url(app.conf.hashbeat_store_url)
    prefix = app.conf.hashbeat_key_prefix
    client.hset(f"{{{prefix}}}:defs", "hand-made", '{"task": "x", "schedule": {"cron": 1}}')
    client.zadd(f"{{{prefix}}}:changes", {"hand-made": 10**6})
    client.close()
    with caplog.at_level(logging.ERROR):
        beat = schedulers(clock)
        read(beat)
        second(clock, beat)
    assert sent(broker) == [("good", iso(START + 1000))]
    assert any("'hand-made'" in r.getMessage() for r in caplog.records)


def test_a_stored_entry_on_listed_workers_is_triggered_on_each_with_ids_of_its_own(
    admin: ScheduleAdmin, app: Celery, clock: Clock, schedulers: Make, redis_url: str
) -> None:
    nodes = ["celery@web-1", "celery@web-2"]
    app.conf.worker_direct = True
    admin.add("refresh", task="shop.report", schedule=hashcron("0 6 * * *"), workers=nodes)
    beat = schedulers(clock)
    read(beat)
    assert sorted(name for name in beat.schedule if name.startswith("refresh")) == [
        f"refresh@{node}" for node in nodes
    ]
    asked = admin.trigger("refresh")
    read(beat)
    client = redis.Redis.from_url(redis_url)
    try:
        found = {
            node: [json.loads(m)["headers"] for m in client.lrange(worker_direct(node).name, 0, -1)]
            for node in nodes
        }
    finally:
        client.delete(*(worker_direct(node).name for node in nodes))
        client.close()
    ids = set()
    for node, headers in found.items():
        assert [h["hashbeat_entry"] for h in headers] == [f"refresh@{node}"]
        assert "hashbeat_trigger" in headers[0]
        ids.add(headers[0]["id"])
    assert len(ids) == 2 and asked not in ids
    admin.remove("refresh")
    read(beat)
    assert not [name for name in beat.schedule if name.startswith("refresh")]


def test_an_entry_handed_back_as_a_definition_keeps_its_bounds(app: Celery) -> None:
    begin = to_datetime(START)
    definition = {
        "task": "t",
        "schedule": EVERY_SECOND,
        "start": begin,
        "end": begin + timedelta(hours=1),
        "max_runs": 3,
    }
    settings = Settings.from_conf(app.conf, warn=False)
    shared = SharedSlots(app)
    entry = build_entry("bounded", definition, settings, shared, START)
    again = build_entry("bounded", as_definition(entry), settings, shared, START)
    assert again.bounds == entry.bounds == (START, START + 3_600_000)
    assert again.max_runs == 3 and again.same_as(entry)
