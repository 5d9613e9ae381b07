"""Fixtures of the chaos tests: a process group reaped after every test, a cluster factory, and
the beats' logs printed when a test fails."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.harness import Cluster
from tests.support.processes import ProcessGroup

REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without ``-m matrix``, only the matrix's diagonal runs (tests/chaos/matrix.py)."""
    if "matrix" in (config.getoption("markexpr", "") or ""):
        return
    from tests.chaos.matrix import diagonal  # noqa: PLC0415 - only the matrix needs it

    chosen = {f"{path}-{fault}" for path, fault in diagonal()}
    off = [
        item
        for item in items
        if item.get_closest_marker("matrix") is not None
        and isinstance(item, pytest.Function)
        and item.callspec.id not in chosen
    ]
    if off:
        config.hook.pytest_deselected(items=off)
        items[:] = [item for item in items if item not in off]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    item.stash.setdefault(REPORTS, {})[report.when] = report
    return report


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[ProcessGroup]:
    """Every process the test starts; all reaped (process groups, SIGCONT then SIGKILL) at the
    end, whatever happened."""
    with ProcessGroup(tmp_path) as group:
        yield group


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest, processes: ProcessGroup
) -> Iterator[Callable[..., Cluster]]:
    """Makes Clusters; on failure prints their timelines and the tail of every beat's log."""
    made: list[Cluster] = []

    def make(**kwargs: Any) -> Cluster:
        made.append(Cluster(processes, **kwargs))
        return made[-1]

    yield make
    call = request.node.stash.get(REPORTS, {}).get("call")
    for each in made:
        if call is None or call.failed:
            print(each.diagnostics(lines=60))
        each.close()
