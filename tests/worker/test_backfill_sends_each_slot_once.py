"""``hashbeat backfill`` with a real worker, a real beat and the command as an operator types it
(docs/design.md §19): entries run every 2 s, each is paused a while and resumed (the slots of the
pause are not sent), then the range is backfilled. Every slot of the range runs exactly once,
whoever sent it: the beat before and after the pause, the backfill in between; a second
backfill sends nothing; a dry run sends nothing and lists which slots were sent; an entry with
``overlap="buffer_one"`` gets its backfilled runs one after another. What ran is what the tasks
recorded (tests/worker/app.py).
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import pytest

from celery_hashbeat.publish.message import slot_task_id
from tests.support.processes import wait_until
from tests.worker.scenario import Scenario

pytestmark = pytest.mark.slow

NODE = "w1@hashbeat-test"


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat()


def slot_ms(text: str) -> int:
    return round(datetime.fromisoformat(text).timestamp() * 1000)


def starts(scenario: Scenario, entry: str) -> list[dict[str, Any]]:
    """The runs of ``entry`` that started, as the tasks recorded them, with ``slot`` in ms."""
    return [
        {**r, "slot": slot_ms(r["slot"])}
        for r in scenario.records()
        if r["entry"] == entry and r["event"] == "start" and r["slot"]
    ]


@dataclass
class Outcome:
    start: int = 0
    end: int = 0
    dry: dict[str, Any] = field(default_factory=dict)
    runs_after_dry: list[dict[str, Any]] = field(default_factory=list)
    first: dict[str, Any] = field(default_factory=dict)
    runs_after_first: list[dict[str, Any]] = field(default_factory=list)
    second: dict[str, Any] = field(default_factory=dict)
    runs_after_second: list[dict[str, Any]] = field(default_factory=list)
    serial: dict[str, Any] = field(default_factory=dict)
    serial_runs: list[dict[str, Any]] = field(default_factory=list)
    serial_ends: dict[str, float] = field(default_factory=dict)
    too_many: tuple[int, str] = (0, "")
    confirmed: tuple[int, str] = (0, "")
    naive: tuple[int, str] = (0, "")
    unknown: tuple[int, str] = (0, "")
    audit: list[dict[str, Any]] = field(default_factory=list)


def ran(scenario: Scenario, *args: str) -> dict[str, Any]:
    done = scenario.hashbeat(*args, "--json")
    assert done.returncode == 0, done.stderr + scenario.diagnostics()
    return dict(json.loads(done.stdout))


def refused(scenario: Scenario, *args: str) -> tuple[int, str]:
    done = scenario.hashbeat(*args)
    return done.returncode, done.stderr


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    scenario = Scenario(tmp_path_factory.mktemp("backfill"), "backfill")
    result = Outcome()
    try:
        scenario.worker(NODE, concurrency=4)
        beat = scenario.beat("beat-1")
        assert wait_until(lambda: len(starts(scenario, "steady")) >= 2, 30, 0.1), (
            scenario.diagnostics()
        )
        # Both entries paused a while: the slots of the pause are never sent by the beat.
        for entry in ("steady", "serial"):
            assert scenario.hashbeat("pause", entry).returncode == 0
        result.start = max(r["slot"] for r in starts(scenario, "steady"))
        time.sleep(7)
        for entry in ("steady", "serial"):
            assert scenario.hashbeat("resume", entry).returncode == 0
        time.sleep(4.5)
        result.end = int(time.time() * 1000)
        between = ("--from", iso(result.start), "--to", iso(result.end))

        result.dry = ran(scenario, "backfill", "steady", *between, "--dry-run")
        time.sleep(2.5)
        result.runs_after_dry = starts(scenario, "steady")

        result.first = ran(scenario, "backfill", "steady", *between, "--reason", "gap")
        wanted = {slot_ms(s["slot"]) for s in result.first["slots"]}
        assert wait_until(
            lambda: wanted <= {r["slot"] for r in starts(scenario, "steady")}, 20, 0.2
        ), scenario.diagnostics()
        time.sleep(2)
        result.runs_after_first = starts(scenario, "steady")
        result.second = ran(scenario, "backfill", "steady", *between)
        time.sleep(3)
        result.runs_after_second = starts(scenario, "steady")

        result.serial = ran(scenario, "backfill", "serial", *between)
        serial_wanted = {slot_ms(s["slot"]) for s in result.serial["slots"]}
        assert wait_until(
            lambda: serial_wanted <= {r["slot"] for r in starts(scenario, "serial")}, 30, 0.2
        ), scenario.diagnostics()
        time.sleep(2)
        result.serial_runs = starts(scenario, "serial")
        result.serial_ends = {
            r["task_id"]: r["at"] for r in scenario.records() if r["event"] == "end"
        }

        six_hours_ago = iso(result.end - 6 * 3_600_000)
        result.too_many = refused(scenario, "backfill", "steady", "--from", six_hours_ago,
                                  "--to", iso(result.end), "--dry-run")  # fmt: skip
        result.confirmed = refused(scenario, "backfill", "steady", "--from", six_hours_ago,
                                   "--to", iso(result.end), "--dry-run", "--yes")  # fmt: skip
        result.naive = refused(scenario, "backfill", "steady", "--from", "2026-01-01T00:00",
                               "--to", iso(result.end))  # fmt: skip
        result.unknown = refused(scenario, "backfill", "nothing", *between)
        audit = scenario.hashbeat("audit", "steady", "--json")
        assert audit.returncode == 0, audit.stderr
        result.audit = json.loads(audit.stdout)
        beat.terminate()
        beat.wait(10)
    finally:
        scenario.close()
    yield result


def in_range(outcome: Outcome, runs: list[dict[str, Any]]) -> Counter[int]:
    return Counter(r["slot"] for r in runs if outcome.start <= r["slot"] <= outcome.end)


def test_a_dry_run_lists_the_slots_and_which_were_sent_and_sends_none(outcome: Outcome) -> None:
    slots = {slot_ms(s["slot"]): s["sent"] for s in outcome.dry["slots"]}
    # Every 2 s over the range, both ends included.
    assert sorted(slots) == list(range(outcome.start, outcome.end + 1, 2000))
    # What it calls sent is what the worker ran of the range (the beat's sends, all done by now).
    sent_by_the_beat = set(in_range(outcome, outcome.runs_after_dry))
    assert {slot for slot, sent in slots.items() if sent} == sent_by_the_beat
    unsent = {slot for slot, sent in slots.items() if not sent}
    assert len(unsent) >= 3  # the pause's
    assert outcome.dry["request"] is None
    assert not unsent & sent_by_the_beat


def test_a_backfill_runs_every_slot_of_the_range_exactly_once(outcome: Outcome) -> None:
    counts = in_range(outcome, outcome.runs_after_first)
    assert sorted(counts) == list(range(outcome.start, outcome.end + 1, 2000))
    assert set(counts.values()) == {1}
    assert outcome.first["to_send"] == len([s for s in outcome.dry["slots"] if not s["sent"]])
    # Each backfilled slot ran with its slot's own task id, as the beat would have sent it.
    backfilled = {slot_ms(s["slot"]) for s in outcome.first["slots"] if not s["sent"]}
    for run in outcome.runs_after_first:
        if run["slot"] in backfilled:
            assert run["task_id"] == slot_task_id("steady", run["slot"])


def test_the_same_backfill_again_sends_nothing(outcome: Outcome) -> None:
    assert outcome.second["to_send"] == 0
    assert all(s["sent"] for s in outcome.second["slots"])
    assert set(in_range(outcome, outcome.runs_after_second).values()) == {1}


def test_a_buffer_one_entry_gets_its_backfilled_runs_one_after_another(
    outcome: Outcome,
) -> None:
    backfilled = {slot_ms(s["slot"]) for s in outcome.serial["slots"] if not s["sent"]}
    assert len(backfilled) >= 3
    runs = sorted(
        (r for r in outcome.serial_runs if r["slot"] in backfilled), key=lambda r: r["at"]
    )
    assert [r["slot"] for r in runs] == sorted(backfilled)
    for before, after in itertools.pairwise(runs):
        assert after["at"] >= outcome.serial_ends[before["task_id"]]
    assert set(in_range(outcome, outcome.serial_runs).values()) == {1}


def test_more_than_ten_thousand_slots_need_yes_and_bad_input_is_refused(
    outcome: Outcome,
) -> None:
    code, message = outcome.too_many
    assert code == 2 and "more than 10,000 slots" in message and "--yes" in message
    # Confirmed, the count no longer stops it; what the store cannot know still does.
    code, message = outcome.confirmed
    assert code == 2 and "10,000" not in message and "were sent only from" in message
    code, message = outcome.naive
    assert code == 2 and "no time zone" in message
    code, message = outcome.unknown
    assert code == 3 and "nothing" in message
    assert "Traceback" not in message


def test_the_audit_trail_records_who_backfilled_what(outcome: Outcome) -> None:
    backfills = [change for change in outcome.audit if change["action"] == "backfill"]
    assert len(backfills) == 2  # the dry run is not a change
    first = backfills[-1]  # newest first
    assert first["reason"] == "gap"
    assert first["details"]["request"] == outcome.first["request"]
    assert first["details"]["slots"] == outcome.first["count"]
    assert first["details"]["to_send"] == outcome.first["to_send"]
    assert slot_ms(first["details"]["from"]) == outcome.start
    assert first["who"]["os_user"]
