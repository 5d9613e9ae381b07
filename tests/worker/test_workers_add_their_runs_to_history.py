"""The worker's side of the history (docs/design.md §14): a real prefork worker adds started and
succeeded or failed, with the run time, to the history the beat began with sent."""

from __future__ import annotations

from collections import defaultdict

import pytest

from celery_hashbeat.observe.history import Record, decode
from tests.support.processes import wait_until
from tests.worker.scenario import Scenario

pytestmark = pytest.mark.slow

NODE = "w1@hashbeat-test"


def by_task(scenario: Scenario, entry: str) -> dict[str, dict[str, Record]]:
    """Each task id of ``entry``'s history with its records by outcome."""
    runs: dict[str, dict[str, Record]] = defaultdict(dict)
    for text in scenario.store.history(entry):
        record = decode(text)
        if record is not None and record.task_id:
            runs[record.task_id].setdefault(record.outcome, record)
    return runs


def ended(scenario: Scenario, entry: str, outcome: str) -> bool:
    return any(
        {"sent", "started", outcome} <= set(run) for run in by_task(scenario, entry).values()
    )


def test_a_slot_task_is_recorded_end_to_end(tmp_path_factory: pytest.TempPathFactory) -> None:
    scenario = Scenario(tmp_path_factory.mktemp("history"), "history")
    try:
        scenario.worker(NODE, f"{scenario.prefix}-default", concurrency=2)
        scenario.beat("beat-1")
        assert wait_until(
            lambda: (
                ended(scenario, "quick", "succeeded")
                and ended(scenario, "raises", "failed")
                and ended(scenario, "time-limited", "failed")
                and ended(scenario, "dies", "failed")
            ),
            30,
            0.2,
        ), scenario.diagnostics()
        run = next(r for r in by_task(scenario, "quick").values() if "succeeded" in r)
        sent, started, done = run["sent"], run["started"], run["succeeded"]
        assert sent.slot == started.slot == done.slot
        assert started.by == done.by == NODE
        assert sent.by.count(":") == 2  # the beat's token, hostname:pid:random
        assert done.run_ms is not None and 300 <= done.run_ms < 2_000
        assert sent.at <= started.at <= done.at
        failed = next(r for r in by_task(scenario, "raises").values() if "failed" in r)["failed"]
        assert failed.run_ms is not None and failed.reason == ""
        # Its process died under it, so the worker's main process tells the end, once.
        lost = [r for r in scenario.store.history("dies") if '"failed"' in r]
        assert lost, scenario.diagnostics()
        died = decode(lost[-1])
        assert died is not None and died.reason == "worker lost" and died.by == NODE
        assert len({decode(text).task_id for text in lost}) == len(lost)  # type: ignore[union-attr]
        limited = [r for r in scenario.store.history("time-limited") if '"failed"' in r]
        assert len({decode(text).task_id for text in limited}) == len(limited)  # type: ignore[union-attr]
    finally:
        scenario.close()
