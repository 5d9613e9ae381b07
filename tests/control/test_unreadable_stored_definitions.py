"""A stored definition that cannot be decoded, whatever its content (nesting, size, types), costs
that entry alone (docs/design.md §13): the beat logs it by name and runs the others. In-process
beats on the real Redis store; the bad values are written straight into the store, as a broken
or hostile writer would."""

from __future__ import annotations

import json
import logging
import time

import pytest
import redis
from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.control import polling as control
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.definitions import decode
from celery_hashbeat.control.stored_text import DefinitionError
from tests.control.fixtures import POLL_S
from tests.support.beat_fixtures import START, Broker, Clock, Make, drain, iso

EVERY_SECOND = {"hashcron": "* * * * * *"}

#: Values no writer of ours makes, each of which once escaped the decoder or broke a beat later.
PATHOLOGICAL = {
    "deep": "[" * 50_000 + "]" * 50_000,
    "deep-kwargs": json.dumps({"task": "shop.report", "schedule": EVERY_SECOND, "changed": 0})[:-1]
    + ', "kwargs": {"a": '
    + "[" * 5_000
    + "]" * 5_000
    + "}}",
    "huge": json.dumps(
        {"task": "shop.report", "schedule": EVERY_SECOND, "args": ["x" * 3_000_000]}
    ),
    "task-number": json.dumps({"task": 5, "schedule": EVERY_SECOND}),
    "every-infinite": '{"task": "shop.report", "schedule": {"every": 1e999}}',
    "changed-far": json.dumps({"task": "shop.report", "schedule": EVERY_SECOND, "changed": 10**30}),
    "overlap-list": json.dumps(
        {"task": "shop.report", "schedule": EVERY_SECOND, "overlap": ["skip"]}
    ),
    "not-utf8-ish": '{"task": "shop.report", "schedule": {"hashcron": "\\ud800"}}',
}


def write_raw(app: Celery, values: dict[str, str]) -> None:
    """Put definitions in the store as a writer that skips every check would."""
    client = redis.Redis.from_url(app.conf.hashbeat_store_url)
    prefix = app.conf.hashbeat_key_prefix
    client.hset(f"{{{prefix}}}:defs", mapping=values)
    version = int(client.incr(f"{{{prefix}}}:version"))
    client.zadd(f"{{{prefix}}}:changes", dict.fromkeys(values, version))
    client.close()


def entries_sent(broker: Broker) -> set[str]:
    return {entry for entry, _ in broker.slots()}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_decoding_any_stored_value_fails_only_as_a_definition_error(name: str) -> None:
    try:
        decode(name, PATHOLOGICAL[name])
    except DefinitionError as exc:
        assert repr(name) in str(exc)
        assert len(str(exc)) < 1_000  # the message names the entry, it does not echo the value


def test_pathological_definitions_beside_good_ones_cost_only_themselves(
    app: Celery,
    admin: ScheduleAdmin,
    schedulers: Make,
    clock: Clock,
    broker: Broker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    admin.add("good-1", task="shop.report", schedule=hashcron("* * * * * *"))
    write_raw(app, PATHOLOGICAL)
    admin.add("good-2", task="shop.report", schedule=hashcron("* * * * * *"))
    with caplog.at_level(logging.ERROR):
        beat = schedulers(clock)
        for _ in range(3):
            clock.advance(1)
            time.sleep(POLL_S * 1.5)
            drain(beat)
    assert {"good-1", "good-2"} <= entries_sent(broker)
    assert ("good-1", iso(START + 3000)) in broker.slots()
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    for name in ("deep", "huge", "task-number", "every-infinite", "changed-far"):
        lines = [line for line in logged if repr(name) in line]
        assert len(lines) == 1, (name, logged)
        assert "hashbeat remove" in lines[0] or "hashbeat update" in lines[0]


def test_a_pathological_definition_added_while_beats_run_leaves_later_changes_readable(
    admin: ScheduleAdmin,
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
) -> None:
    admin.add("good-1", task="shop.report", schedule=hashcron("* * * * * *"))
    beat = schedulers(clock)
    time.sleep(POLL_S * 1.5)
    drain(beat)
    write_raw(app, {"deep": PATHOLOGICAL["deep"]})
    time.sleep(POLL_S * 1.5)
    drain(beat)
    admin.add("good-2", task="shop.report", schedule=hashcron("* * * * * *"))
    for _ in range(3):
        clock.advance(1)
        time.sleep(POLL_S * 1.5)
        drain(beat)
    assert {"good-1", "good-2"} <= entries_sent(broker)


def test_the_polled_version_moves_only_once_the_result_is_applied(admin: ScheduleAdmin) -> None:
    admin.add("good-1", task="shop.report", schedule=hashcron("* * * * * *"))
    controls = control.ControlState()

    def fail(changed: control.Changed) -> None:
        raise RuntimeError("the catalog could not take it")

    with pytest.raises(RuntimeError):
        controls.poll(admin.store.changes(controls.version), fail)
    assert controls.version == 0  # read again whole at the next poll
    applied: list[control.Changed] = []
    controls.poll(admin.store.changes(controls.version), applied.append)
    assert controls.version > 0
    assert applied[0].full and applied[0].definitions.keys() == {"good-1"}
