"""Changing the schedule while real beats run (docs/design.md §13): two ``celery beat`` processes, a
real worker, and one private redis-server as broker and store. An operator, through the
``hashbeat`` command (a subprocess), adds an entry, pauses and resumes it, triggers it, kills the
leading beat, updates the entry's expression and removes it; the tasks' own record
(tests/worker/app.py) says what ran, for which slot, and when. (ScheduleAdmin, which the
commands call, is tested in-process in tests/control/test_admin_changes_reach_running_beats.py.)
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest

from tests.support.processes import Process, wait_until
from tests.worker.scenario import Run, Scenario

pytestmark = pytest.mark.slow

W1 = "w1@hashbeat-test"


def hashed_second(key: str, step: int) -> int:
    """The first second of ``H/<step>`` in the seconds field for ``key``, by docs/design.md §3."""
    digest = hashlib.sha256(key.encode() + b"\x1fsecond\x1f0").digest()
    return int.from_bytes(digest[:8], "big") % step


@dataclass
class Outcome:
    """What the scenario did (instants in epoch seconds) and what the workers recorded."""

    #: When each change took effect: its command returned (a loaded machine takes seconds to
    #: start one, so the moment it was typed says little).
    at: dict[str, float] = field(default_factory=dict)
    #: When each change was typed: its command started.
    asked: dict[str, float] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    triggered: list[dict[str, Any]] = field(default_factory=list)
    trigger_id: str = ""
    diagnostics: str = ""

    def slots(self, after: str, before: str | None = None) -> list[float]:
        """The slots that ran, between two of the scenario's moments."""
        low, high = self.at[after], self.at[before] if before else float("inf")
        return [run.slot for run in self.runs if low < run.slot <= high]


def operator(scenario: Scenario) -> Callable[..., str]:
    """``hashbeat ARGS -A tests.worker.app`` as an operator types it; its output."""

    def hashbeat(*args: str) -> str:
        done = scenario.hashbeat(*args)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    return hashbeat


def leader_of(scenario: Scenario, beats: dict[str, Process]) -> Process:
    def holder() -> Process | None:
        lease = scenario.store.leader()
        pid = None if lease is None else int(lease.token.split(":")[1])
        return next((beat for beat in beats.values() if beat.alive and beat.pid == pid), None)

    assert wait_until(holder, 20, 0.1), scenario.diagnostics()
    found = holder()
    assert found is not None
    return found


def ran_after(scenario: Scenario, moment: float, count: int, timeout: float) -> bool:
    def enough() -> bool:
        runs = scenario.runs().get("report", [])
        return sum(run.slot > moment for run in runs) >= count

    return wait_until(enough, timeout, 0.1)


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    scenario = Scenario(tmp_path_factory.mktemp("control"), "control")
    hashbeat = operator(scenario)
    result = Outcome()
    try:
        scenario.worker(W1, concurrency=2)
        beats = {name: scenario.beat(name) for name in ("beat-a", "beat-b")}
        leader_of(scenario, beats)
        at = result.at

        def change(name: str, *args: str) -> str:
            result.asked[name] = time.time()
            said = hashbeat(*args)
            at[name] = time.time()
            return said

        at["added"] = time.time()
        hashbeat("add", "report", "--task", "workers.run", "--cron", "H/3 * * * * *")
        assert ran_after(scenario, at["added"], 2, 15), scenario.diagnostics()
        change("paused", "pause", "report", "--reason", "supplier outage")
        time.sleep(3.5)
        change("resumed", "resume", "report")
        assert ran_after(scenario, at["resumed"], 1, 10), scenario.diagnostics()
        result.trigger_id = change("triggered", "trigger", "report").splitlines()[0]
        wait_until(lambda: any(r["trigger"] for r in scenario.records()), 10, 0.1)
        leader_of(scenario, beats).kill()
        at["killed"] = time.time()
        change("updated", "update", "report", "--cron", "H/4 * * * * *")
        assert ran_after(scenario, at["updated"], 2, 20), scenario.diagnostics()
        change("removed", "remove", "report")
        time.sleep(3)
        at["end"] = time.time()
        result.runs = scenario.runs().get("report", [])
        result.triggered = [r for r in scenario.records() if r["trigger"] and r["event"] == "start"]
        result.diagnostics = scenario.diagnostics()
    finally:
        scenario.close()
    yield result


def test_an_added_entry_runs_at_its_hashed_slots_from_its_next_slot_on(outcome: Outcome) -> None:
    slots = outcome.slots("added", "paused")
    assert len(slots) >= 2, outcome.diagnostics
    assert {int(slot) % 3 for slot in slots} == {hashed_second("report", 3)}
    assert all(slot == int(slot) for slot in slots)


def test_nothing_runs_while_paused_and_the_resume_sends_no_burst(outcome: Outcome) -> None:
    # Slots due up to a second after the pause may have been sent before the beat read it.
    assert outcome.slots("paused", "resumed") == [
        slot for slot in outcome.slots("paused", "resumed") if slot <= outcome.at["paused"] + 1
    ]
    first_after = min(run.slot for run in outcome.runs if run.slot > outcome.asked["resumed"])
    assert first_after - outcome.at["resumed"] <= 3


def test_a_trigger_runs_once_with_its_own_task_id(outcome: Outcome) -> None:
    assert [run["task_id"] for run in outcome.triggered] == [outcome.trigger_id]
    asked = datetime.fromisoformat(outcome.triggered[0]["trigger"]).timestamp()
    assert outcome.asked["triggered"] - 0.5 < asked < outcome.at["triggered"] + 0.5
    assert outcome.triggered[0]["at"] - outcome.at["triggered"] < 2
    # The schedule went on around it: slots after the trigger still ran at the hashed seconds.
    assert {int(s) % 3 for s in outcome.slots("resumed", "updated")} == {hashed_second("report", 3)}


def test_the_standby_applies_the_update_with_no_double_and_no_back_dated_run(
    outcome: Outcome,
) -> None:
    slots = [run.slot for run in outcome.runs]
    assert len(slots) == len(set(slots)), "a slot ran twice"
    after = outcome.slots("updated", "removed")
    assert len(after) >= 2, outcome.diagnostics
    assert {int(slot) % 4 for slot in after} == {hashed_second("report", 4)}
    assert all(slot > outcome.at["updated"] for slot in after)


def test_a_removed_entry_runs_no_more(outcome: Outcome) -> None:
    assert [s for s in outcome.slots("removed") if s > outcome.at["removed"] + 1] == []
