"""Promises per entry (docs/design.md §19) with a real worker and beat: the leader learns from
the workers' history that a task fails run after run and pauses its entry after its
``pause_after_failures``, with a reason that says why, recorded in the audit trail; an entry
whose runs succeed is left alone."""

from __future__ import annotations

import json
import time

import pytest

from celery_hashbeat.control.audit import trail
from tests.observe.beats import Beat
from tests.support.processes import wait_until
from tests.support.redis_server import free_port
from tests.worker.scenario import Scenario

pytestmark = pytest.mark.slow

NODE = "w1@hashbeat-test"


def paused(scenario: Scenario, entry: str) -> dict[str, object] | None:
    record = scenario.store.controls_of(entry)[1]
    data = None if record is None else json.loads(record)
    return data if data and data.get("paused") else None


def starts(scenario: Scenario, entry: str) -> int:
    return sum(1 for r in scenario.records() if r["entry"] == entry and r["event"] == "start")


def test_an_entry_that_keeps_failing_is_paused_after_its_limit(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    scenario = Scenario(tmp_path_factory.mktemp("promises"), "promises")
    try:
        began_s = time.time()
        scenario.worker(NODE, f"{scenario.prefix}-default", concurrency=2)
        port = free_port()
        scenario.env["HASHBEAT_WORKERS_HTTP_PORT"] = str(port)
        beat = Beat(scenario.beat("beat-1"), port)
        assert wait_until(lambda: paused(scenario, "flaky"), 40, 0.2), scenario.diagnostics()
        pause = paused(scenario, "flaky")
        assert pause is not None
        reason = str(pause["reason"])
        assert "3 failures in a row" in reason and "pause_after_failures" in reason
        assert starts(scenario, "flaky") >= 3
        # Parked: at most a run already sent when the pause landed starts after it.
        time.sleep(1.0)
        settled = starts(scenario, "flaky")
        time.sleep(4.5)
        assert starts(scenario, "flaky") == settled, scenario.diagnostics()
        assert starts(scenario, "healthy") >= 3
        assert paused(scenario, "healthy") is None
        samples = beat.metrics()
        assert samples['hashbeat_entry_consecutive_failures{entry="flaky"}'] >= 3
        assert samples['hashbeat_entry_consecutive_failures{entry="healthy"}'] == 0
        success = samples['hashbeat_entry_last_success_timestamp_seconds{entry="healthy"}']
        assert began_s <= success <= time.time()
        assert 'hashbeat_entry_last_success_timestamp_seconds{entry="flaky"}' not in samples
        (change,) = trail(scenario.store, "flaky")
        assert change.action == "pause" and change.reason == reason
        assert change.who.user.startswith("leader ")
    finally:
        scenario.close()
