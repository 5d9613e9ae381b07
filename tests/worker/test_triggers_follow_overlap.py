"""A trigger follows its entry's overlap policy (docs/design.md §12-13), with a real worker, a real
beat and the real ``hashbeat trigger`` command: an entry with ``overlap="skip"`` whose run lasts
8 s is triggered, triggered again while that run goes on (refused, exit code 6), asked for once
more behind the command's back (the leader skips it), then forced (it runs beside the first run,
and the history says it was forced). What ran is what the tasks recorded (tests/worker/app.py).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from celery_hashbeat.control.pause_and_trigger import Trigger, encode_trigger
from celery_hashbeat.observe.history import decode
from tests.support.processes import wait_until
from tests.worker.scenario import Scenario

pytestmark = pytest.mark.slow

NODE = "w1@hashbeat-test"
RACED = "asked-behind-the-commands-back"


@dataclass
class Outcome:
    first: str = ""
    refused: subprocess.CompletedProcess[str] | None = None
    forced: dict[str, Any] = field(default_factory=dict)
    starts: dict[str, float] = field(default_factory=dict)
    ends: dict[str, float] = field(default_factory=dict)
    history: list[tuple[str, str, str]] = field(default_factory=list)
    beat_log: str = ""
    diagnostics: str = ""


def events(scenario: Scenario, event: str) -> dict[str, float]:
    return {r["task_id"]: r["at"] for r in scenario.records() if r["event"] == event}


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    scenario = Scenario(tmp_path_factory.mktemp("trigger"), "trigger")
    result = Outcome()
    try:
        scenario.worker(NODE, concurrency=3)
        beat = scenario.beat("beat-1")
        assert wait_until(scenario.store.leader, 20, 0.1), scenario.diagnostics()
        first = scenario.hashbeat("trigger", "guarded")
        assert first.returncode == 0, first.stderr
        result.first = first.stdout.splitlines()[0]
        assert wait_until(lambda: result.first in events(scenario, "start"), 15, 0.1), (
            scenario.diagnostics()
        )
        result.refused = scenario.hashbeat("trigger", "guarded")
        scenario.store.ask(encode_trigger(Trigger("guarded", RACED, int(time.time() * 1000))))
        forced = scenario.hashbeat("trigger", "guarded", "--force", "--json")
        assert forced.returncode == 0, forced.stderr
        result.forced = json.loads(forced.stdout)
        done = {result.first, result.forced["task_id"]}
        assert wait_until(lambda: done <= set(events(scenario, "end")), 30, 0.2), (
            scenario.diagnostics()
        )
        time.sleep(1.5)  # the beat writes its history with its next store calls
        result.starts, result.ends = events(scenario, "start"), events(scenario, "end")
        records = [decode(text) for text in scenario.store.history("guarded", 20)]
        result.history = [(r.outcome, r.task_id, r.reason) for r in records if r is not None]
        beat.terminate()
        beat.wait(10)
        result.beat_log = scenario.log(beat)
        result.diagnostics = scenario.diagnostics()
    finally:
        scenario.close()
    yield result


def test_a_trigger_while_a_run_holds_the_lease_is_refused_with_exit_code_6(
    outcome: Outcome,
) -> None:
    refused = outcome.refused
    assert refused is not None
    assert refused.returncode == 6, (refused.stdout, refused.stderr)
    assert outcome.first in refused.stderr
    assert "--force" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_trigger_that_reaches_the_leader_during_the_run_is_skipped_and_recorded(
    outcome: Outcome,
) -> None:
    assert RACED not in outcome.starts, outcome.diagnostics
    skipped = [(task, reason) for kind, task, reason in outcome.history if kind == "skipped"]
    assert [task for task, _ in skipped] == [RACED]
    assert outcome.first in skipped[0][1]
    assert f"the trigger {RACED} of guarded is not sent" in outcome.beat_log


def test_a_forced_trigger_runs_beside_the_run_and_is_recorded_as_forced(outcome: Outcome) -> None:
    forced = outcome.forced
    assert forced["forced"] is True and forced["running"] == outcome.first
    task = forced["task_id"]
    assert outcome.starts[task] < outcome.ends[outcome.first]  # two runs at once, as asked
    assert ("trigger", task, "forced past the overlap guard") in outcome.history
    assert ("trigger", outcome.first, "") in outcome.history


def test_no_unforced_trigger_ran_on_top_of_a_run(outcome: Outcome) -> None:
    unforced = sorted(
        (start, outcome.ends.get(task, float("inf")))
        for task, start in outcome.starts.items()
        if task != outcome.forced["task_id"]
    )
    assert len(unforced) == 1, outcome.diagnostics
