"""The URL factory, and the store's independence from Celery and the scheduler."""

from __future__ import annotations

from pathlib import Path

import pytest

from celery_hashbeat.store import RedisStore, SQLiteStore, StoreConfigError, open_store


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "REDIS://127.0.0.1/1",
        "rediss://127.0.0.1:6380/0?ssl_cert_reqs=none",
        "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/0?master_name=mymaster",
        "rediss+sentinel://127.0.0.1:26379/0?master_name=mymaster",
    ],
)
def test_redis_schemes_open_a_redis_store_without_connecting(url: str) -> None:
    store = open_store(url, "prefix")
    try:
        assert isinstance(store, RedisStore)
    finally:
        store.close()


def test_sqlite_scheme_opens_a_sqlite_store(tmp_path: Path) -> None:
    store = open_store(f"SQLite:///{tmp_path}/beat.sqlite", "prefix")
    try:
        assert isinstance(store, SQLiteStore)
    finally:
        store.close()


@pytest.mark.parametrize("url", ["", "127.0.0.1:6379", "amqp://guest@localhost//", "file:///x"])
def test_unknown_schemes_name_the_supported_ones(url: str) -> None:
    with pytest.raises(StoreConfigError) as raised:
        open_store(url)
    message = str(raised.value)
    assert "hashbeat_store_url" in message
    for scheme in ("redis://", "rediss://", "redis+sentinel://", "sqlite:///"):
        assert scheme in message


def test_the_url_attribute_masks_the_password() -> None:
    store = open_store("redis://user:pa%40ss@127.0.0.1:6379/0")
    try:
        assert store.url == "redis://user:***@127.0.0.1:6379/0"
    finally:
        store.close()
