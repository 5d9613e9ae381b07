"""Fixtures every part of the suite shares: real Redis servers and per-test key prefixes."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import settings

from tests.support.processes import ROOT
from tests.support.redis_server import RedisProcess, shared_redis_url

settings.register_profile("ci", max_examples=200, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session", autouse=True)
def checkout_stays_clean() -> Iterator[None]:
    """No test may leave a store file in the checkout (the default store URL is relative)."""
    stray = ROOT / "celerybeat-hashbeat.sqlite"
    existed = stray.exists()
    yield
    if stray.exists() and not existed:
        stray.unlink()
        for suffix in ("-wal", "-shm"):
            Path(f"{stray}{suffix}").unlink(missing_ok=True)
        pytest.fail(f"a test left {stray} behind: give it a store URL in a temporary directory")


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
