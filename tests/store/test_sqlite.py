"""What only the SQLite store has: a path to get right and a file that others may lock or spoil."""

from __future__ import annotations

import logging
import os
import pwd
import sqlite3
import tempfile
import time
from pathlib import Path

import pytest

from celery_hashbeat.store import SQLiteStore, StoreConfigError, StoreUnavailable, open_store
from celery_hashbeat.store.sqlite import clock, schema
from celery_hashbeat.store.values import Fence

LONG = 60_000


def test_relative_and_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rel").mkdir()
    relative = open_store("sqlite:///rel/beat.sqlite")
    absolute = open_store(f"sqlite:///{tmp_path}/rel/beat.sqlite")
    try:
        assert isinstance(relative, SQLiteStore)
        assert isinstance(absolute, SQLiteStore)
        assert relative.path == absolute.path == str(tmp_path / "rel" / "beat.sqlite")
        assert relative.acquire("a", LONG)
        assert not absolute.acquire("b", LONG)
    finally:
        relative.close()
        absolute.close()


def test_the_file_is_shared_in_wal_mode(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/beat.sqlite")
    store.close()
    raw = sqlite3.connect(tmp_path / "beat.sqlite")
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        raw.close()


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("sqlite://:memory:", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
        ("sqlite://", "no file path"),
        ("sqlite:///", "no file path"),
        ("sqlite://host/beat.sqlite", "no file path"),
        ("sqlite:////no/such/directory/beat.sqlite", "does not exist"),
        ("sqlite:///beat.sqlite?timeout=soon", "timeout"),
        ("sqlite:///beat.sqlite?socket_timeout=1", "unknown option"),
    ],
)
def test_malformed_urls_are_config_errors(url: str, complaint: str) -> None:
    with pytest.raises(StoreConfigError, match="hashbeat_store_url") as raised:
        open_store(url)
    assert complaint in str(raised.value)


def test_a_directory_is_no_database(tmp_path: Path) -> None:
    with pytest.raises(StoreConfigError, match="is a directory"):
        open_store(f"sqlite:///{tmp_path}")


def test_a_corrupt_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "beat.sqlite"
    path.write_bytes(b"this is no database " * 100)
    with pytest.raises(StoreConfigError, match="not a SQLite database") as raised:
        open_store(f"sqlite:///{path}")
    assert str(path) in str(raised.value)


def open_as_nobody(url: str) -> str:
    """Open the store in a forked child that has dropped root for ``nobody`` (root may write any
    file), and return what it raised: the check runs for real under CI's root user too."""
    nobody = pwd.getpwnam("nobody")
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(reader)
        message = "opened"
        try:
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            open_store(url).close()
        except StoreConfigError as exc:
            message = f"StoreConfigError: {exc}"
        except BaseException as exc:
            message = f"{type(exc).__name__}: {exc}"
        os.write(writer, message.encode())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        message = pipe.read().decode()
    os.waitpid(child, 0)
    return message


@pytest.mark.parametrize("directory_writable", [True, False])
def test_an_unwritable_file_is_a_config_error_naming_it(
    tmp_path: Path, directory_writable: bool
) -> None:
    path = tmp_path / "beat.sqlite"
    open_store(f"sqlite:///{path}").close()
    if os.geteuid() == 0:
        tmp_path.chmod(0o777 if directory_writable else 0o755)
        path.chmod(0o644)
        # nobody must be able to reach the folder through pytest's private parents.
        for parent in tmp_path.parents:
            if str(parent).startswith(tempfile.gettempdir() + os.sep):
                parent.chmod(parent.stat().st_mode | 0o011)
        message = open_as_nobody(f"sqlite:///{path}")
    else:
        path.chmod(0o400)
        tmp_path.chmod(0o700 if directory_writable else 0o500)
        try:
            open_store(f"sqlite:///{path}")
            message = "opened"
        except StoreConfigError as exc:
            message = f"StoreConfigError: {exc}"
        finally:
            tmp_path.chmod(0o700)
    assert message.startswith("StoreConfigError"), message
    assert "readonly" in message
    assert str(path) in message


def test_a_locked_file_is_unavailable_within_the_timeout_and_reads_go_on(tmp_path: Path) -> None:
    path = tmp_path / "beat.sqlite"
    store = open_store(f"sqlite:///{path}", timeout=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process, stuck inside its transaction
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="locked") as raised:
            store.acquire("a", LONG)
        assert time.monotonic() - started < 2.5
        assert str(path) in str(raised.value)
        assert store.leader() is None  # WAL: readers never wait for the writer
        holder.execute("ROLLBACK")
        assert store.acquire("a", LONG)
    finally:
        holder.close()
        store.close()


def test_a_file_locked_at_open_is_prepared_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "beat.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    store = open_store(f"sqlite:///{path}?timeout=0.2")
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            store.ping()
        holder.execute("COMMIT")
        store.ping()
        assert store.acquire("a", LONG)
    finally:
        holder.close()
        store.close()


def test_several_prefixes_share_one_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/beat.sqlite"
    first, second = open_store(url, "one"), open_store(url, "two")
    try:
        assert first.acquire("a", LONG)
        assert second.acquire("b", LONG)
        assert first.claim("a", {"x": (1, "fp")}) == {"x"}
        assert second.last_slots() == {}
    finally:
        first.close()
        second.close()


def test_a_wall_clock_step_neither_stretches_nor_cuts_the_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease is timed on the host's monotonic clock: an NTP step or a hand-set clock (the
    one thing this test has to fake) changes nothing."""
    store = open_store(f"sqlite:///{tmp_path}/beat.sqlite")
    real = time.time
    try:
        assert store.acquire("a", 300)
        monkeypatch.setattr(time, "time", lambda: real() + 3600)  # an hour forward
        assert store.renew("a", 300)
        assert store.leader() is not None
        monkeypatch.setattr(time, "time", lambda: real() - 3600)  # an hour back
        time.sleep(0.5)
        assert store.leader() is None  # lapsed after its TTL, as it should
        assert store.acquire("b", LONG)
    finally:
        store.close()


def test_a_wall_clock_step_neither_hides_nor_keeps_heartbeats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Heartbeats expire on the monotonic clock too; only ``last_seen_ms``, for people, is
    wall-clock time."""
    store = open_store(f"sqlite:///{tmp_path}/beat.sqlite")
    real = time.time
    try:
        store.heartbeat("short", "standby", 300)
        store.heartbeat("long", "leader", LONG)
        monkeypatch.setattr(time, "time", lambda: real() + 3600)  # an hour forward
        assert {beat.token for beat in store.beats()} == {"short", "long"}
        monkeypatch.setattr(time, "time", lambda: real() - 3600)  # an hour back
        time.sleep(0.5)
        store.heartbeat("late", "standby", LONG)
        beats = store.beats()
        assert [beat.token for beat in beats] == ["long", "late"]  # most recent by the wall clock
        assert abs(beats[1].last_seen_ms - (real() - 3600) * 1000) < 5_000
    finally:
        store.close()


def test_a_lease_from_another_boot_or_too_far_ahead_has_lapsed(tmp_path: Path) -> None:
    """The monotonic clock restarts at boot: a lease row is live only in the boot that wrote it
    and while its expiry is no further ahead than its TTL."""
    path = tmp_path / "beat.sqlite"
    store = open_store(f"sqlite:///{path}")
    db = sqlite3.connect(path)

    def lease(boot: str, ahead_ms: int, ttl_ms: int) -> None:
        expires = int(time.monotonic() * 1000) + ahead_ms
        db.execute(
            "INSERT OR REPLACE INTO hashbeat_lease (prefix, token, expires_ms, boot, ttl_ms)"
            " VALUES ('hashbeat', 'ghost', ?, ?, ?)",
            (expires, boot, ttl_ms),
        )
        db.commit()

    try:
        lease(clock.BOOT, LONG, LONG)
        holder = store.leader()
        assert holder is not None
        assert holder.token == "ghost"
        lease("a boot before this one", LONG, LONG)
        assert store.leader() is None
        lease(clock.BOOT, LONG, 1_000)  # set with 1 s to live, yet a minute ahead
        assert store.leader() is None
        assert store.acquire("a", LONG)
    finally:
        db.close()
        store.close()


def test_a_file_of_release_0_1_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE hashbeat_lease (prefix TEXT PRIMARY KEY, token TEXT NOT NULL,
            expires_ms INTEGER NOT NULL);
        CREATE TABLE hashbeat_fired (prefix TEXT NOT NULL, entry TEXT NOT NULL,
            slot INTEGER NOT NULL, PRIMARY KEY (prefix, entry)) WITHOUT ROWID;
        CREATE TABLE hashbeat_beats (prefix TEXT NOT NULL, token TEXT NOT NULL,
            role TEXT NOT NULL, last_seen_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL,
            PRIMARY KEY (prefix, token)) WITHOUT ROWID;
        INSERT INTO hashbeat_fired VALUES ('hashbeat', 'nightly', 1700000000000);
        INSERT INTO hashbeat_lease VALUES ('hashbeat', 'old-beat', 99999999999999);
        INSERT INTO hashbeat_beats VALUES ('hashbeat', 'old-beat', 'leader', 1, 99999999999999);
        PRAGMA user_version = 1;
        """
    )
    db.close()
    store = open_store(f"sqlite:///{path}")
    try:
        assert store.fences() == {"nightly": Fence(1_700_000_000_000, "-", None)}
        assert store.leader() is None  # a wall-clock lease of the old release has lapsed
        assert store.beats() == []  # and so has its heartbeat
        assert store.acquire("a", LONG)
        assert store.anchor("a", {"nightly": (5, "fp")}) == {
            "nightly": Fence(1_700_000_000_000, "-", None)
        }
        assert store.claim("a", {"nightly": (1_700_000_000_000, "fp")}) == set()
        assert store.claim("a", {"nightly": (1_700_000_060_000, "fp")}) == {"nightly"}
        assert store.fences()["nightly"].runs == 1  # the run count's column, added in place
        store.heartbeat("a", "leader", LONG, "0f3a")
        assert [(beat.token, beat.schedule_digest) for beat in store.beats()] == [("a", "0f3a")]
    finally:
        store.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
        assert schema.SCHEMA_VERSION > 1
    finally:
        db.close()


def test_an_unreadable_fence_is_logged_once_skipped_and_overwritten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "beat.sqlite"
    store = open_store(f"sqlite:///{path}")
    try:
        db = sqlite3.connect(path)
        db.execute(
            "INSERT INTO hashbeat_fired (prefix, entry, slot) VALUES ('hashbeat', 'x', 'oops')"
        )
        db.commit()
        db.close()
        with caplog.at_level(logging.WARNING, logger="celery_hashbeat.store"):
            assert store.fences() == {}
            assert store.last_slots(["x"]) == {}
        assert len([r for r in caplog.records if "oops" in r.getMessage()]) == 1
        assert store.acquire("a", LONG)
        assert store.claim("a", {"x": (5, "fp")}) == {"x"}
        assert store.last_slots() == {"x": 5}
    finally:
        store.close()
