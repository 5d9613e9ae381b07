"""The worker's node name in the hash (docs/design.md §3, §11), with real workers and real beats.

Two beats share a private redis-server (broker and store) with real prefork workers started with
distinct ``-n`` names and ``worker_direct=True``. "fan-all" (``"workers": "*"``) and "fan-listed"
(``["w1@hashbeat-test"]``) run ``H/3 * * * * *``: each copy every 3 s at the second its own key
hashes to. A third worker joins, the second leaves, the leading beat is killed; the tasks' own
record says who ran what and when.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest

from celery_hashbeat import parse
from tests.support.processes import Process, wait_until
from tests.worker.scenario import Run, Scenario

pytestmark = pytest.mark.slow

W1, W2, W3 = (f"w{n}@hashbeat-test" for n in (1, 2, 3))
PERIOD = 3


def expected_second(key: str) -> int:
    """The first second of ``H/3`` in the seconds field for ``key``, by docs/design.md §3."""
    digest = hashlib.sha256(key.encode() + b"\x1fsecond\x1f0").digest()
    return int.from_bytes(digest[:8], "big") % PERIOD


@dataclass
class Outcome:
    runs: dict[str, list[Run]]
    logs: str
    #: When W2 was stopped, and whether its copy's fence was forgotten and stayed so.
    w2_stopped_at: float
    w2_fence_dropped: bool
    killed_at: float
    diagnostics: str


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    scenario = Scenario(tmp_path_factory.mktemp("fanout"), "fanout")
    try:
        yield run_scenario(scenario)
    finally:
        scenario.close()


def ran(scenario: Scenario, entry: str, count: int, timeout: float) -> bool:
    return wait_until(lambda: len(scenario.runs().get(entry, [])) >= count, timeout, 0.1)


def run_scenario(scenario: Scenario) -> Outcome:
    first = [scenario.worker(node, concurrency=1, wait=False) for node in (W1, W2)]
    for process, node in zip(first, (W1, W2), strict=True):
        scenario.ready(process, node)
    beats = [scenario.beat("beat-1"), scenario.beat("beat-2")]
    for node in (W1, W2):
        assert ran(scenario, f"fan-all@{node}", 1, 20), scenario.diagnostics()

    third = scenario.worker(W3, concurrency=1)
    assert ran(scenario, f"fan-all@{W3}", 1, 15), scenario.diagnostics()

    w2_stopped_at = time.time()
    first[1].terminate()
    first[1].wait(15)
    name = f"fan-all@{W2}"
    assert wait_until(lambda: f"worker {W2} left" in logs(beats), 10), scenario.diagnostics()
    dropped = wait_until(lambda: name not in scenario.store.last_slots([name]), 5)

    leader = leading(scenario, beats)
    strike_between_slots(scenario)
    killed_at = time.time()
    leader.kill()
    # The standby takes over and catches up; then two more slots of every copy.
    for node in (W1, W3):
        count = len(scenario.runs().get(f"fan-all@{node}", []))
        assert ran(scenario, f"fan-all@{node}", count + 2, 20), scenario.diagnostics()
    # Gone for good: through the failover and the slots since, nothing of it was claimed again.
    dropped = dropped and name not in scenario.store.last_slots([name])
    for beat in beats:
        beat.terminate()
        beat.wait(10)
    third.terminate()
    return Outcome(
        scenario.runs(), logs(beats), w2_stopped_at, dropped, killed_at, scenario.diagnostics()
    )


def logs(beats: list[Process]) -> str:
    return "\n".join(beat.log.read_text(errors="replace") for beat in beats if beat.log.exists())


def leading(scenario: Scenario, beats: list[Process]) -> Process:
    lease = scenario.store.leader()
    assert lease is not None
    pid = int(lease.token.split(":")[1])
    return next(beat for beat in beats if beat.pid == pid)


def strike_between_slots(scenario: Scenario) -> None:
    """Sleep to a moment at least 0.3 s from every copy's next slot: SIGKILL between a claim
    and its publish loses that slot by design (at most once), so the test strikes between
    ticks, as the chaos suite does."""
    keys = [f"fan-all@{W1}", f"fan-all@{W3}", f"fan-listed@{W1}"]
    now = datetime.now(timezone.utc)
    slots = [parse("H/3 * * * * *", key).next(now).timestamp() for key in keys]
    moment = time.time() + 0.05
    while any(abs(moment - slot) < 0.3 for slot in slots):
        moment += 0.05
    time.sleep(max(0.0, moment - time.time()))


def test_each_worker_runs_only_its_own_copy(outcome: Outcome) -> None:
    copies = {entry: runs for entry, runs in outcome.runs.items() if entry.startswith("fan-")}
    assert set(copies) == {f"fan-all@{W1}", f"fan-all@{W2}", f"fan-all@{W3}", f"fan-listed@{W1}"}
    for entry, runs in copies.items():
        node = entry.partition("@")[2]
        assert {run.host for run in runs} == {node}, (entry, runs)


def test_each_copy_runs_at_the_second_its_key_hashes_to(outcome: Outcome) -> None:
    seconds = {}
    for entry, runs in outcome.runs.items():
        seconds[entry] = {round(run.slot) % PERIOD for run in runs}
        assert seconds[entry] == {expected_second(entry)}, (entry, seconds[entry])
    # One configuration, different seconds: the keys of this scenario hash apart.
    fan_all = [expected_second(f"fan-all@{node}") for node in (W1, W2, W3)]
    assert len(set(fan_all)) > 1, fan_all


def test_a_list_restricts_the_fan_out(outcome: Outcome) -> None:
    listed = [entry for entry in outcome.runs if entry.startswith("fan-listed")]
    assert listed == [f"fan-listed@{W1}"]


def test_a_worker_started_later_joins(outcome: Outcome) -> None:
    assert re.search(rf"worker {re.escape(W3)} joined", outcome.logs), outcome.logs
    assert outcome.runs.get(f"fan-all@{W3}"), outcome.diagnostics


def test_a_worker_that_stopped_leaves(outcome: Outcome) -> None:
    assert outcome.logs.count(f"worker {W2} left") == 1, outcome.logs
    assert outcome.w2_fence_dropped, outcome.diagnostics
    late = [run for run in outcome.runs[f"fan-all@{W2}"] if run.start > outcome.w2_stopped_at]
    assert not late, late


def test_killing_the_leader_loses_no_slot_of_any_copy(outcome: Outcome) -> None:
    for entry in (f"fan-all@{W1}", f"fan-all@{W3}", f"fan-listed@{W1}"):
        slots = sorted(run.slot for run in outcome.runs[entry])
        assert len(slots) == len(set(slots)), (entry, "a slot ran twice", slots)
        gaps = {round(later - earlier) for earlier, later in itertools.pairwise(slots)}
        assert gaps == {PERIOD}, (entry, slots)
        assert slots[-1] > outcome.killed_at, (entry, "nothing ran after the kill")
