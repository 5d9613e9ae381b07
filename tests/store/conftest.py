"""Each protocol test runs against every store: the session Redis, a SQLite file of its own and a
database of its own on the session's private PostgreSQL (skipped, with the reason, where none can
be started)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from celery_hashbeat.store import Store, open_store


@dataclass(frozen=True)
class Backend:
    name: str
    url: str
    prefix: str


@pytest.fixture(params=["redis", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "redis":
        url = request.getfixturevalue("redis_url")
        return Backend("redis", url, request.getfixturevalue("key_prefix"))
    if request.param == "postgres":
        return Backend("postgres", request.getfixturevalue("postgres_url"), "hashbeat-test")
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


@pytest.fixture
def write_raw(backend: Backend, store: Store) -> Callable[[str, str], None]:
    """Writes a fence value by hand, behind the store's back, as a hand edit or an older release
    would: into the Redis hash, or split over the SQLite or PostgreSQL columns (a value that is
    not four fields goes whole into the slot column of SQLite, so it reads back unchanged;
    PostgreSQL's typed slot column cannot hold one, so such a value cannot be written there)."""

    def write(entry: str, value: str) -> None:
        if backend.name == "redis":
            client = redis.Redis.from_url(backend.url, decode_responses=True)
            try:
                client.hset(f"{{{backend.prefix}}}:fired", entry, value)
            finally:
                client.close()
            return
        fields = value.split("|", 3)
        if backend.name == "postgres":
            store.ping()  # its tables are made on first use
            write_postgres(backend, entry, fields, value)
            return
        columns = fields if len(fields) == 4 else [value, "-", "", ""]
        db = sqlite3.connect(backend.url.removeprefix("sqlite:///"))
        try:
            db.execute(
                "INSERT OR REPLACE INTO hashbeat_fired (prefix, entry, slot, token, previous,"
                " fingerprint) VALUES (?, ?, ?, ?, ?, ?)",
                (backend.prefix, entry, *columns),
            )
            db.commit()
        finally:
            db.close()

    return write


def write_postgres(backend: Backend, entry: str, fields: list[str], value: str) -> None:
    """A fence written over the PostgreSQL columns; a value whose slot is not a number cannot
    be stored in the bigint column, so the test that writes one is skipped on PostgreSQL."""
    import psycopg  # noqa: PLC0415 - the other stores' tests run without psycopg

    columns = fields if len(fields) == 4 else [value, "-", "", ""]
    if not columns[0].isdigit():
        pytest.skip(f"PostgreSQL's bigint slot column cannot hold the unreadable value {value!r}")
    table = f'"{backend.prefix}_fired"'
    with psycopg.connect(backend.url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {table} (entry, slot, token, previous, fingerprint) VALUES"  # type: ignore[arg-type]
            " (%s, %s, %s, %s, %s) ON CONFLICT (entry) DO UPDATE SET slot = excluded.slot,"
            " token = excluded.token, previous = excluded.previous,"
            " fingerprint = excluded.fingerprint",
            (entry, int(columns[0]), *columns[1:]),
        )
