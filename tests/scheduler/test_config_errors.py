"""A configuration mistake under ``celery beat`` (a real subprocess) ends it with one line that
names the setting and says what to write: no traceback, no flood of log records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import ROOT

pytestmark = pytest.mark.slow


def beat(config: dict[str, Any], *args: str, timeout: float = 20) -> tuple[int | None, str]:
    """Run ``celery beat`` on the config app; its exit code (None if still running after
    ``timeout`` seconds, then stopped) and everything it printed."""
    env = {**os.environ, "HASHBEAT_CONFIG": json.dumps(config), "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable, "-m", "celery", "-A", "tests.scheduler.config_app", "beat",
        "-S", "celery_hashbeat.Scheduler", "--loglevel=INFO", *args,
    ]  # fmt: skip
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        try:
            output, _ = process.communicate(timeout=timeout)
            return process.returncode, output
        except subprocess.TimeoutExpired:
            process.terminate()
            output, _ = process.communicate(timeout=10)
            return None, output


BANNER = ("celery beat v", "__    -", "LocalTime -> ", "Configuration ->", "    . ")
STARTING = "beat: Starting..."


def error_lines(output: str) -> list[str]:
    """What beat printed besides Celery's start banner and its "Starting" line (printed when the
    mistake is found once the store is opened)."""
    return [
        line
        for line in output.splitlines()
        if line.strip() and not line.startswith(BANNER) and not line.endswith(STARTING)
    ]


@pytest.mark.parametrize(
    ("config", "named", "fix"),
    [
        ({"hashbeat_catch_up": "newest"}, "hashbeat_catch_up", "'latest', 'all', 'skip'"),
        ({"hashbeat_lease_ttl": -1}, "hashbeat_lease_ttl", "positive number of seconds"),
        ({"hashbeat_store_options": {"bogus": 1}}, "bogus", "use timeout"),
        ({"hashbeat_store_url": "sqlite:////no/such/dir/x.sqlite"}, "/no/such/dir", "create it"),
        ({"hashbeat_store_url": "mongodb://x"}, "hashbeat_store_url", "redis://"),
    ],
)
def test_a_mistake_ends_beat_with_one_clear_line(
    config: dict[str, Any], named: str, fix: str, tmp_path: Path
) -> None:
    config.setdefault("hashbeat_store_url", f"sqlite:///{tmp_path}/store.sqlite")
    code, output = beat(config)
    assert code not in (0, None), output
    assert "Traceback" not in output, output
    lines = error_lines(output)
    assert len(lines) == 1, lines
    assert named in lines[0] and fix in lines[0], lines[0]


def test_a_mistyped_setting_is_named_with_the_closest_one(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/store.sqlite"
    _, output = beat({"hashbeat_store_url": store, "hashbeat_lease_tll": 3}, timeout=6)
    warnings = [line for line in output.splitlines() if "hashbeat_lease_tll" in line]
    assert len(warnings) == 1, output
    assert "did you mean hashbeat_lease_ttl?" in warnings[0]


def test_a_schedule_file_is_said_to_be_unused(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/store.sqlite"
    _, output = beat({"hashbeat_store_url": store}, f"--schedule={tmp_path}/beat.db", timeout=6)
    notes = [line for line in output.splitlines() if "is not used" in line]
    assert len(notes) == 1 and f"{tmp_path}/beat.db" in notes[0], output
