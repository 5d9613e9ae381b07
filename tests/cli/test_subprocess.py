"""The installed commands as an operator runs them: ``hashbeat``, ``python -m celery_hashbeat``
and ``celery -A proj hashbeat``, in real processes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from celery_hashbeat import parse
from celery_hashbeat.cli.output import Exit
from celery_hashbeat.store import Store
from tests.cli.conftest import APP

Run = Callable[..., subprocess.CompletedProcess[str]]


def test_hashbeat_explain(run: Run) -> None:
    done = run("hashbeat", "explain", "H H(0-2) * * *", "--key", "nightly", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resolved"] == str(parse("H H(0-2) * * *", "nightly"))


def test_python_dash_m(run: Run) -> None:
    done = run("python", "-m", "celery_hashbeat", "--help")
    assert done.returncode == 0, done.stderr
    assert "Exit codes:" in done.stdout
    for command in ("explain", "lint", "schedule", "spread", "status"):
        assert command in done.stdout


def test_bad_expression(run: Run) -> None:
    done = run("hashbeat", "explain", "H * * * *", "--key", "k", "--tz", "Nowhere/Atall")
    assert done.returncode == Exit.USAGE
    assert "unknown time zone 'Nowhere/Atall'" in done.stderr
    assert "Traceback" not in done.stderr


def test_lint_exit_codes(run: Run) -> None:
    assert run("hashbeat", "lint", "H * * * *").returncode == 0
    done = run("hashbeat", "lint", "0 * * * *")
    assert done.returncode == Exit.FINDINGS
    assert "use H instead of 0" in done.stdout


def test_celery_hashbeat_schedule(run: Run, store: Store) -> None:
    assert store.acquire("host:9:x", 10_000)
    store.claim("host:9:x", {"nightly-report": (1_700_000_000_000, "fp")})
    done = run("celery", "-A", APP, "hashbeat", "schedule", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["entries"]}
    assert rows["nightly-report"]["resolved"] == str(parse("@midnight", "nightly-report"))
    assert rows["nightly-report"]["last_ms"] == 1_700_000_000_000
    assert "added-hourly" in rows


def test_celery_hashbeat_status_check(run: Run, store: Store) -> None:
    done = run("celery", "-A", APP, "hashbeat", "status", "--check")
    assert done.returncode == Exit.FINDINGS
    assert "no beat holds the lease" in done.stderr
    assert store.acquire("host:7:y", 30_000)
    done = run("celery", "-A", APP, "hashbeat", "status", "--check")
    assert done.returncode == 0, done.stderr
    assert "host:7:y" in done.stdout


def test_unknown_apps(run: Run) -> None:
    done = run("hashbeat", "status", "-A", "nosuch", "--check")
    assert done.returncode == Exit.SETUP
    assert done.stderr.strip() == (
        "Error: cannot load the app 'nosuch': there is no module 'nosuch' (run from the "
        "project's directory, or add it to PYTHONPATH)"
    )
    done = run("celery", "-A", "nosuch", "hashbeat", "status")  # Celery's own message
    assert done.returncode != 0
    assert "The module nosuch was not found" in done.stderr
    assert "Traceback" not in done.stderr


def test_unreachable_store(run: Run) -> None:
    done = run("hashbeat", "status", "--store", "redis://127.0.0.1:1/0", "--check")
    assert done.returncode == Exit.STORE
    assert len(done.stderr.strip().splitlines()) == 1
    assert "not answering" in done.stderr


def test_celery_explain_uses_the_apps_timezone(run: Run, tmp_path: Path) -> None:
    """Under ``celery -A proj``, an expression means what it means in that app's beat; --tz
    still wins, and plain ``hashbeat explain`` (no app) stays in UTC."""
    config = {"timezone": "Europe/Riga", "hashbeat_store_url": f"sqlite:///{tmp_path}/s.sqlite"}
    env = {"HASHBEAT_CONFIG": json.dumps(config)}
    app = ["celery", "-A", "tests.beat.config_app", "hashbeat"]
    args = ["explain", "0 9 * * *", "--after", "2026-06-01", "-n", "1", "--json"]
    done = run(*app, *args, env=env)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["tz"] == "Europe/Riga"
    assert shown["next"] == [
        {"local": "2026-06-01T09:00:00+03:00", "utc": "2026-06-01T06:00:00+00:00"}
    ]
    done = run(*app, *args, "--tz", "Asia/Tokyo", env=env)
    assert json.loads(done.stdout)["tz"] == "Asia/Tokyo", done.stderr
    done = run("hashbeat", *args, env=env)
    assert json.loads(done.stdout)["tz"] == "UTC", done.stderr


def test_an_empty_key_is_refused(run: Run) -> None:
    done = run("hashbeat", "explain", "H * * * *", "--key", "")
    assert done.returncode == Exit.USAGE
    assert "'--key'" in done.stderr and "entry's name" in done.stderr
    assert "Traceback" not in done.stderr
