"""No run on top of a run (docs/design.md §12), with real prefork workers and a real beat.

One scenario runs every overlap mode side by side: each entry is due every 2 s, the long ones run
5 s. The tasks record their own starts and ends in Redis (tests/worker/app.py), so every check
reads what the workers did. At the end the worker running the 30 s "victim" is killed with its
whole process group, and its entry must be free again within the run TTL.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.processes import wait_until
from tests.worker.app import RUNNING_TTL
from tests.worker.scenario import Run, Scenario

pytestmark = pytest.mark.slow

PERIOD = 2.0
#: How long the beat may schedule before the victim's worker is killed; it is killed as soon as
#: every check below has what it needs (``enough``), usually after about half of this.
RUNNING_FOR = 30.0
#: How long the victim's one run must have lasted before its worker is killed: without renewals
#: its run lease would have lapsed twice over and a later slot would have started a second run.
VICTIM_HELD = 2 * RUNNING_TTL + PERIOD


@dataclass
class Outcome:
    runs: dict[str, list[Run]]
    beat_log: str
    #: Seconds from the victim's worker being killed to another slot taking the entry's lease.
    freed_after: float | None
    victim_runs_before_kill: int
    diagnostics: str


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    scenario = Scenario(tmp_path_factory.mktemp("overlap"), "overlap")
    try:
        yield run_scenario(scenario)
    finally:
        scenario.close()


def run_scenario(scenario: Scenario) -> Outcome:
    default = f"{scenario.prefix}-default"
    workers = [
        ("w1@hashbeat-test", default),
        ("w2@hashbeat-test", default),
        ("w3@hashbeat-test", "allow"),
    ]
    started = [scenario.worker(node, queues, wait=False) for node, queues in workers]
    for process, (node, _) in zip(started, workers, strict=True):
        scenario.ready(process, node)
    beat = scenario.beat("beat-1")
    wait_until(lambda: enough(scenario, scenario.log(beat)), RUNNING_FOR, 0.2)

    victim_runs = len(scenario.runs().get("victim", []))
    held = scenario.store.running(["victim"]).get("victim")
    killed_at = time.monotonic()
    started[2].reap()  # the worker and its pool processes, as a machine that dies
    freed = wait_until(
        lambda: scenario.store.running(["victim"]).get("victim") not in (None, held),
        RUNNING_TTL + PERIOD + 5,
    )
    freed_after = time.monotonic() - killed_at if freed else None
    beat.terminate()
    beat.wait(10)
    return Outcome(
        scenario.runs(),
        scenario.log(beat),
        freed_after,
        victim_runs,
        scenario.diagnostics(),
    )


def enough(scenario: Scenario, beat_log: str) -> bool:
    """Whether the record already holds what every test of this module checks: the run counts
    they ask for, a line counting skips, and the victim's run held for VICTIM_HELD. (The
    assertions are the tests'; this only decides when the scenario has run long enough.)"""
    runs = scenario.runs()
    counts = {"skip-long": 2, "allow-long": 3, "buffer-long": 2, "replace-long": 4}
    counts |= dict.fromkeys(["raises", "retries", "time-limited"], 4)
    if any(len(runs.get(entry, [])) < count for entry, count in counts.items()):
        return False
    if not re.search(r"skip-long runs again at slot \S+ after \d+ skipped", beat_log):
        return False
    victim = runs.get("victim", [])
    return bool(victim) and time.time() - victim[0].start >= VICTIM_HELD


def overlapping(runs: list[Run]) -> list[tuple[Run, Run]]:
    """Pairs of consecutive runs where the second started before the first ended."""
    return [
        (first, second)
        for first, second in itertools.pairwise(runs)
        if first.end is None or second.start < first.end
    ]


def slot_gaps(runs: list[Run]) -> list[float]:
    """The distances between consecutive slots that ran."""
    slots = sorted(run.slot for run in runs)
    return [round(later - earlier, 3) for earlier, later in itertools.pairwise(slots)]


def test_skip_never_starts_a_run_while_one_runs(outcome: Outcome) -> None:
    runs = outcome.runs.get("skip-long", [])
    assert len(runs) >= 2, outcome.diagnostics
    assert not overlapping(runs), runs


def test_allow_overlaps_as_celery_does(outcome: Outcome) -> None:
    runs = outcome.runs.get("allow-long", [])
    assert len(runs) >= 3, outcome.diagnostics
    assert overlapping(runs), runs
    assert set(slot_gaps(runs)) == {PERIOD}, slot_gaps(runs)


def test_buffer_one_starts_the_newest_slot_right_after_the_run_ends(outcome: Outcome) -> None:
    runs = outcome.runs.get("buffer-long", [])
    assert len(runs) >= 2, outcome.diagnostics
    for first, second in itertools.pairwise(runs):
        assert first.end is not None, runs
        waited = second.start - first.end
        assert 0 <= waited <= 1.0, f"run of slot {second.slot} started {waited:.2f}s after {runs}"
        # The slot sent is the newest one due by the end of the run; older ones were skipped.
        assert first.end - PERIOD <= second.slot <= first.end + 1.0, runs
    assert min(slot_gaps(runs)) > PERIOD, "a waiting slot was sent besides the newest"


def test_replace_revokes_the_running_task_and_starts_the_slot(outcome: Outcome) -> None:
    runs = outcome.runs.get("replace-long", [])
    assert len(runs) >= 4, outcome.diagnostics
    assert set(slot_gaps(runs)) == {PERIOD}, slot_gaps(runs)
    # Every run but the newest was ended by its replacement, long before its 5 s were up.
    assert all(run.end is None for run in runs[:-1]), runs
    assert "replaces its run" in outcome.beat_log


@pytest.mark.parametrize("entry", ["raises", "retries", "time-limited"])
def test_a_run_that_ends_badly_frees_its_entry(outcome: Outcome, entry: str) -> None:
    """Raised, retried, or killed by its hard time limit: each run lets the next slot run, so
    no slot of the entry is skipped."""
    runs = outcome.runs.get(entry, [])
    assert len(runs) >= 4, outcome.diagnostics
    assert set(slot_gaps(runs)) == {PERIOD}, (entry, slot_gaps(runs))


def test_skips_are_logged_once_per_run_of_skips(outcome: Outcome) -> None:
    runs = outcome.runs.get("skip-long", [])
    skipped = re.findall(r"skip-long slot \S+ skipped", outcome.beat_log)
    resumed = re.findall(r"skip-long runs again at slot \S+ after (\d+) skipped", outcome.beat_log)
    assert 1 <= len(skipped) <= len(runs), outcome.beat_log
    # Each 5 s run keeps the entry busy over two 2 s slots: they are counted in one line.
    assert resumed and all(int(count) >= 2 for count in resumed), outcome.beat_log


def test_a_killed_worker_frees_the_entry_within_the_run_ttl(outcome: Outcome) -> None:
    # The victim runs 30 s on a 3 s TTL: only renewals kept it from running twice before.
    assert outcome.victim_runs_before_kill == 1, outcome.runs.get("victim")
    assert outcome.freed_after is not None, outcome.diagnostics
    assert outcome.freed_after <= RUNNING_TTL + PERIOD + 1.5


def test_the_beat_logs_no_traceback(outcome: Outcome) -> None:
    assert "celery beat v" in outcome.beat_log
    assert "Traceback" not in outcome.beat_log, outcome.beat_log
