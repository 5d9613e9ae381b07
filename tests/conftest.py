"""Fixtures every part of the suite shares: real Redis servers and per-test key prefixes, and
the in-process beat fixtures of tests/support/beat_fixtures.py (an app on the real Redis, a clock
the test moves, the broker queue read back, schedulers), which several rooms' tests use."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import settings

from tests.support.beat_fixtures import app, broker, clock, schedulers
from tests.support.postgres import postgres_server, postgres_url
from tests.support.processes import ROOT
from tests.support.redis_server import RedisProcess, shared_redis_url

# The beat fixtures and the private PostgreSQL, for every room.
__all__ = ["app", "broker", "clock", "postgres_server", "postgres_url", "schedulers"]

settings.register_profile("ci", max_examples=200, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def store_files() -> set[Path]:
    """SQLite store files (and their -wal/-shm) at the top of the checkout, where a relative
    store URL such as the default ``sqlite:///celerybeat-hashbeat.sqlite`` puts them."""
    return {path for path in ROOT.glob("*.sqlite*") if path.is_file()}


def fail_on_stray(before: set[Path], who: str, fix: str) -> None:
    """Fail if store files appeared since ``before``; delete them first, so the next run starts
    clean."""
    stray = store_files() - before
    if stray:
        for path in stray:
            path.unlink(missing_ok=True)
        names = ", ".join(sorted(path.name for path in stray))
        pytest.fail(f"{who} left {names} in {ROOT}: {fix}", pytrace=False)


@pytest.fixture(autouse=True)
def no_store_file_in_checkout(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that leaves a store file in the checkout fails, by name: give it a store URL in
    ``tmp_path`` (or run it in ``monkeypatch.chdir(tmp_path)``), since the default store URL is
    relative and a checkout is shared by every run."""
    before = store_files()
    yield
    fix = "give it a store URL in a temporary directory (f'sqlite:///{tmp_path}/store.sqlite')"
    fail_on_stray(before, request.node.nodeid, fix)


@pytest.fixture(scope="session", autouse=True)
def checkout_stays_clean() -> Iterator[None]:
    """The same check over the whole session, for files written by processes that outlive their
    test: the checkout must end the run with no store file it did not start with."""
    before = store_files()
    yield
    fail_on_stray(before, "the test run", "give every test a store URL in a temporary directory")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """The session's private Redis; tests keep apart through ``key_prefix``."""
    url, private = shared_redis_url()
    yield url
    if private is not None:
        private.stop()


@pytest.fixture
def key_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix no other test uses; its keys are deleted afterwards."""
    prefix = f"hashbeat-test-{uuid.uuid4().hex[:12]}"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"*{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture
def private_redis() -> Iterator[RedisProcess]:
    """A redis-server of this test's own, which it may kill, pause and restart."""
    with RedisProcess() as server:
        yield server
