"""The suite keeps to itself: the Redis it writes to is one it started (or one named for it), and
the checkout gains no store file (tests/conftest.py checks that after every test)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import redis


def test_the_session_redis_is_private_unless_one_is_named(redis_url: str) -> None:
    """A developer's or CI's Redis on 6379 is never written to: the session starts its own
    redis-server on a free port with its files in a temporary directory."""
    named = os.environ.get("HASHBEAT_TEST_REDIS_URL")
    if named:
        assert redis_url == named
        return
    assert urlsplit(redis_url).port != 6379
    client = redis.Redis.from_url(redis_url)
    try:
        directory = client.config_get("dir")["dir"]
    finally:
        client.close()
    assert Path(directory).name.startswith("hashbeat-redis-")
    assert Path(directory).parent == Path(tempfile.gettempdir())
