"""The example project, started as the README starts it: a real worker and two real beats."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SENT = re.compile(r"^\[ *(beat-\d)\] Scheduler: Sending due task (\S+) .* slot (\S+)$")
RAN = re.compile(r"^\[ *worker\] ran \S+ for entry (\S+), slot (\S+)$")

pytestmark = pytest.mark.slow


def run_example(*args: str) -> tuple[int, list[str]]:
    finished = subprocess.run(
        [sys.executable, "-m", "example_project", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    return finished.returncode, (finished.stdout + finished.stderr).splitlines()


def sends_by_beat(lines: list[str]) -> Counter[str]:
    return Counter(m.group(1) for line in lines if (m := SENT.match(line)))


def test_one_leader_enqueues_the_worker_runs_each_slot_once_and_the_standby_takes_over() -> None:
    """One run of the example (a worker, two beats; the leader stopped halfway) proves both
    halves of the README's story: until the stop exactly one beat enqueues while the other
    stands by, and the worker runs each slot once; after it, the standby takes over and no slot
    is enqueued twice across the handover."""
    code, lines = run_example("--seconds", "20")
    output = "\n".join(lines)
    assert code == 0, output
    stop = next(i for i, line in enumerate(lines) if "stopping the leader" in line)
    before, after = sends_by_beat(lines[:stop]), sends_by_beat(lines[stop:])
    assert len(before) == 1, f"expected exactly one beat to enqueue, got {before}\n{output}"
    assert any("standing by" in line for line in lines[:stop]), output
    assert len(after) == 1, output
    assert before.keys() != after.keys(), output
    runs = Counter(m.groups() for line in lines if (m := RAN.match(line)))
    assert runs, output
    assert max(runs.values()) == 1, output
    sent = [m.group(2, 3) for line in lines if (m := SENT.match(line))]
    assert set(runs) <= set(sent), output
    assert len(sent) == len(set(sent)), output
    assert "Traceback" not in output
