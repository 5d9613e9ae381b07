"""A revoked run releases its run lease (docs/design.md §12): ``revoke(id, terminate=True)`` on a
guarded entry's run lets the entry's next slot run, instead of waiting out the run TTL. A real
prefork worker and a real beat; the run TTL is long (20 s), so a lease that merely lapsed would
show as a gap of many slots."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery

from tests.support.processes import wait_until
from tests.worker.scenario import Run, Scenario

pytestmark = pytest.mark.slow

PERIOD = 2.0
RUNNING_TTL = 20.0
REVOKES = 2


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Scenario]:
    made = Scenario(tmp_path, "revoke")
    made.env["HASHBEAT_WORKERS_RUNNING_TTL"] = str(RUNNING_TTL)
    try:
        yield made
    finally:
        made.close()


def runs(scenario: Scenario) -> list[Run]:
    return scenario.runs().get("long", [])


def test_each_run_revoked_with_terminate_lets_the_next_slot_run(scenario: Scenario) -> None:
    """Twice in a row: the receivers of a revoke and of the killed process race in the worker,
    and either may come first."""
    worker = scenario.worker("w1@hashbeat-test", f"{scenario.prefix}-default", concurrency=2)
    beat = scenario.beat("beat-1")
    control = Celery("revoker", broker=scenario.redis.url, set_as_current=False)
    try:
        for revokes in range(REVOKES):
            assert wait_until(lambda n=revokes: len(runs(scenario)) > n, 30, 0.1), (
                "the next slot did not run after the revoke:\n" + scenario.diagnostics()
            )
            run = runs(scenario)[revokes]
            assert wait_until(
                lambda id=run.task_id: scenario.store.running(["long"]).get("long") == id, 10, 0.1
            ), scenario.diagnostics()
            control.control.revoke(run.task_id, terminate=True)
            revoked_at = time.time()
            assert wait_until(lambda n=revokes: len(runs(scenario)) > n + 1, 3 * PERIOD + 2, 0.1), (
                "the next slot did not run after the revoke:\n" + scenario.diagnostics()
            )
            following = runs(scenario)[revokes + 1]
            assert following.start - revoked_at < RUNNING_TTL / 2, (following, revoked_at)
            assert runs(scenario)[revokes].end is None  # it was terminated, not finished
    finally:
        control.close()
    assert worker.alive and beat.alive
