"""Fixtures for the command line tests: the in-process runner, real subprocesses, the test app."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from celery_hashbeat.cli import main
from celery_hashbeat.store import Store, open_store
from tests.cli import proj

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
APP = "tests.cli.proj"


@pytest.fixture
def invoke() -> Callable[..., Result]:
    """Runs ``hashbeat ARGS`` in this process; stdout and stderr apart."""
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(main, list(args), input=input)

    return invoke


@pytest.fixture
def store(redis_url: str, key_prefix: str) -> Iterator[Store]:
    """The store the test app uses in this test: the session Redis, under this test's prefix."""
    opened = open_store(redis_url, key_prefix)
    yield opened
    opened.close()


@pytest.fixture
def app_store(
    monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str, store: Store
) -> Store:
    """Points the in-process test app at this test's store."""
    monkeypatch.setitem(proj.app.conf, "hashbeat_store_url", redis_url)
    monkeypatch.setitem(proj.app.conf, "hashbeat_key_prefix", key_prefix)
    return store


@pytest.fixture
def run(
    redis_url: str, key_prefix: str, tmp_path: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Runs a real command (``hashbeat``, ``celery``, ``python``) from the venv, with the test
    app importable and pointed at this test's store. It runs in ``tmp_path``, not the checkout,
    so that a relative store URL (the default one) never leaves a file in the checkout;
    ``env`` adds variables (``HASHBEAT_CONFIG`` for ``tests.beat.config_app``)."""
    base = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "HASHBEAT_TEST_STORE_URL": redis_url,
        "HASHBEAT_TEST_PREFIX": key_prefix,
        "COLUMNS": "100",
    }

    def run(
        program: str, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / program), *args],
            cwd=tmp_path,
            env={**base, **(env or {})},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    return run
