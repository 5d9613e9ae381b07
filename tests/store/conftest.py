"""Each protocol test runs against both stores: the session Redis and a SQLite file of its own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from celery_hashbeat.store import Store, open_store


@dataclass(frozen=True)
class Backend:
    name: str
    url: str
    prefix: str


@pytest.fixture(params=["redis", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        return Backend("redis", url, request.getfixturevalue("key_prefix"))
    return Backend("sqlite", f"sqlite:///{tmp_path}/hashbeat.sqlite", "hashbeat-test")


@pytest.fixture
def connect(backend: Backend) -> Iterator[Callable[..., Store]]:
    """Opens more store objects on the same backend, as other beat processes would; closes them."""
    opened: list[Store] = []

    def connect(prefix: str = backend.prefix, **options: object) -> Store:
        store = open_store(backend.url, prefix, **options)
        opened.append(store)
        return store

    yield connect
    for store in opened:
        store.close()


@pytest.fixture
def store(connect: Callable[..., Store]) -> Store:
    return connect()
