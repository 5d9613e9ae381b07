"""The fault x path matrix (docs/design.md §17), judged cell by cell.

With ``-m slow`` a diagonal runs: every path once and every fault at least once.
``pytest -m matrix`` runs every cell (``.ci/run`` does); ``-k`` picks cells by name, e.g.
``-k "amqp-confirms and sigstop"``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path as FilePath

import pytest

from tests.chaos.harness import Cluster
from tests.chaos.matrix import Cell, Path, cells, run
from tests.support.redis_server import RedisProcess

pytestmark = [pytest.mark.slow, pytest.mark.matrix]


@pytest.mark.parametrize(
    ("path", "fault"), [pytest.param(p, f, id=f"{p.name}-{f}") for p, f in cells()]
)
def test_every_slot_at_most_once_and_none_lost_unless_logged(
    path: Path,
    fault: str,
    private_redis: RedisProcess,
    cluster: Callable[..., Cluster],
    tmp_path: FilePath,
) -> None:
    with contextlib.ExitStack() as stack:
        cell = Cell(path, fault, private_redis, cluster, stack, tmp_path)
        found = run(cell)
    more = f"\n... and {len(found) - 20} more" if len(found) > 20 else ""
    assert not found, f"{len(found)} problem(s):\n" + "\n".join(found[:20]) + more
