"""The one-host store: a SQLite file that the beat processes of one host share.

Every change is one ``BEGIN IMMEDIATE`` transaction, which takes the file's write lock up front,
so two processes never interleave a check and its write. Times are wall-clock milliseconds
(``time.time()``), the only clock that separate processes share; the lease holds until its
``expires_ms``, as a Redis key with a TTL would. Several prefixes may share one file.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from ._util import DEFAULT_TIMEOUT_S, Options, check_prefix, check_ttl, config_error
from .base import BeatInfo, LeaseInfo, Store, StoreUnavailable

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS hashbeat_lease (prefix TEXT PRIMARY KEY, token TEXT NOT NULL,"
    " expires_ms INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS hashbeat_fired (prefix TEXT NOT NULL, entry TEXT NOT NULL,"
    " slot INTEGER NOT NULL, PRIMARY KEY (prefix, entry)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS hashbeat_beats (prefix TEXT NOT NULL, token TEXT NOT NULL,"
    " role TEXT NOT NULL, last_seen_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL,"
    " PRIMARY KEY (prefix, token)) WITHOUT ROWID",
)

SCHEMA_VERSION = 1

# Entries per ``IN (...)`` query: below the 999 bound parameters that older SQLite builds allow.
CHUNK = 500


def _now_ms() -> int:
    return int(time.time() * 1000)


def _busy(exc: sqlite3.Error) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


class SQLiteStore(Store):
    """The coordination protocol in a SQLite file (WAL mode, so readers never wait for a writer).

    Options, in the URL's query or as keywords: ``timeout``, the seconds to wait for another
    process's write lock before answering StoreUnavailable (default 3). ``transport_options``
    is accepted and ignored, so the same options can be handed to either store.

    Opening checks the path (StoreConfigError if it cannot be a database); a file that is
    locked at that moment is prepared on first use instead.
    """

    def __init__(self, url: str, prefix: str = "hashbeat", **options: object) -> None:
        self.url = url
        self._prefix = check_prefix(prefix)
        self.path = _path(url)
        opts = Options(url, url.partition("?")[2], options, ("timeout", "transport_options"))
        self._timeout = opts.seconds("timeout", DEFAULT_TIMEOUT_S)
        self._lock = threading.Lock()
        self._ready = False
        try:
            self._db = sqlite3.connect(
                self.path, timeout=self._timeout, isolation_level=None, check_same_thread=False
            )
            self._prepare()
        except sqlite3.Error as exc:
            if not _busy(exc):
                fix = "give a writable SQLite file in a writable directory, or another path"
                raise config_error(url, self._describe(exc), fix) from exc

    def _prepare(self) -> None:
        """WAL mode and the schema; idempotent, so every process may race to do it."""
        self._db.execute("PRAGMA journal_mode=WAL")
        # A claim must survive a power cut, or the slot it fenced could be enqueued again.
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for statement in SCHEMA:
                self._db.execute(statement)
            # Always a real write, so that a read-only file is found out now, not at first claim.
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        finally:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        self._ready = True

    def _describe(self, exc: sqlite3.Error) -> str:
        if _busy(exc):
            return f"{self.path} stayed locked by another process for {self._timeout}s"
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
            return f"{self.path} is not a SQLite database or is corrupt"
        return f"{self.path} cannot be used ({exc})"

    @contextmanager
    def _tx(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction; a write one holds the file's write lock from its first statement."""
        with self._lock:
            try:
                if not self._ready:
                    self._prepare()
                self._db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield self._db
                    self._db.execute("COMMIT")
                finally:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
            except sqlite3.Error as exc:
                raise StoreUnavailable(f"SQLite store {self._describe(exc)}; will retry") from exc

    def _holds(self, db: sqlite3.Connection, token: str, now: int) -> bool:
        row = db.execute(
            "SELECT 1 FROM hashbeat_lease WHERE prefix = ? AND token = ? AND expires_ms > ?",
            (self._prefix, token, now),
        ).fetchone()
        return row is not None

    def _stored(self, db: sqlite3.Connection, entries: list[str]) -> dict[str, int]:
        stored: dict[str, int] = {}
        for start in range(0, len(entries), CHUNK):
            chunk = entries[start : start + CHUNK]
            rows = db.execute(
                "SELECT entry, slot FROM hashbeat_fired WHERE prefix = ?"
                f" AND entry IN ({', '.join('?' * len(chunk))})",
                (self._prefix, *chunk),
            )
            stored.update(rows)
        return stored

    def acquire(self, token: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        with self._tx() as db:
            now = _now_ms()
            row = db.execute(
                "SELECT token FROM hashbeat_lease WHERE prefix = ? AND expires_ms > ?",
                (self._prefix, now),
            ).fetchone()
            if row is not None:
                return bool(row[0] == token)
            db.execute(
                "INSERT OR REPLACE INTO hashbeat_lease VALUES (?, ?, ?)",
                (self._prefix, token, now + ttl_ms),
            )
            return True

    def renew(self, token: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        with self._tx() as db:
            now = _now_ms()
            renewed = db.execute(
                "UPDATE hashbeat_lease SET expires_ms = ?"
                " WHERE prefix = ? AND token = ? AND expires_ms > ?",
                (now + ttl_ms, self._prefix, token, now),
            )
            return renewed.rowcount == 1

    def release(self, token: str) -> bool:
        with self._tx() as db:
            released = db.execute(
                "DELETE FROM hashbeat_lease WHERE prefix = ? AND token = ? AND expires_ms > ?",
                (self._prefix, token, _now_ms()),
            )
            return released.rowcount == 1

    def leader(self) -> LeaseInfo | None:
        with self._tx(write=False) as db:
            now = _now_ms()
            row = db.execute(
                "SELECT token, expires_ms FROM hashbeat_lease WHERE prefix = ? AND expires_ms > ?",
                (self._prefix, now),
            ).fetchone()
        return None if row is None else LeaseInfo(row[0], row[1] - now)

    def claim(self, token: str, slots: Mapping[str, int]) -> dict[str, int | None]:
        if not slots:
            return {}
        with self._tx() as db:
            if not self._holds(db, token, _now_ms()):
                return {}
            stored = self._stored(db, list(slots))
            claimed = {
                entry: stored.get(entry)
                for entry, slot in slots.items()
                if entry not in stored or slot > stored[entry]
            }
            db.executemany(
                "INSERT OR REPLACE INTO hashbeat_fired VALUES (?, ?, ?)",
                ((self._prefix, entry, int(slots[entry])) for entry in claimed),
            )
        return claimed

    def unclaim(self, token: str, entry: str, slot: int, previous: int | None) -> bool:
        with self._tx() as db:
            if not self._holds(db, token, _now_ms()) or self._stored(db, [entry]) != {entry: slot}:
                return False
            if previous is None:
                db.execute(
                    "DELETE FROM hashbeat_fired WHERE prefix = ? AND entry = ?",
                    (self._prefix, entry),
                )
            else:
                db.execute(
                    "UPDATE hashbeat_fired SET slot = ? WHERE prefix = ? AND entry = ?",
                    (int(previous), self._prefix, entry),
                )
            return True

    def last_slots(self, entries: Iterable[str] | None = None) -> dict[str, int]:
        with self._tx(write=False) as db:
            if entries is not None:
                return self._stored(db, list(entries))
            rows = db.execute(
                "SELECT entry, slot FROM hashbeat_fired WHERE prefix = ?", (self._prefix,)
            )
            return dict(rows)

    def forget(self, entries: Iterable[str]) -> None:
        with self._tx() as db:
            db.executemany(
                "DELETE FROM hashbeat_fired WHERE prefix = ? AND entry = ?",
                ((self._prefix, entry) for entry in entries),
            )

    def heartbeat(self, token: str, role: str, ttl_ms: int) -> None:
        check_ttl(ttl_ms)
        with self._tx() as db:
            now = _now_ms()
            db.execute(
                "DELETE FROM hashbeat_beats WHERE prefix = ? AND expires_ms <= ?",
                (self._prefix, now),
            )
            db.execute(
                "INSERT OR REPLACE INTO hashbeat_beats VALUES (?, ?, ?, ?, ?)",
                (self._prefix, token, role, now, now + ttl_ms),
            )

    def beats(self) -> list[BeatInfo]:
        with self._tx(write=False) as db:
            rows = db.execute(
                "SELECT token, last_seen_ms, role FROM hashbeat_beats"
                " WHERE prefix = ? AND expires_ms > ? ORDER BY last_seen_ms DESC, token",
                (self._prefix, _now_ms()),
            )
            return [BeatInfo(*row) for row in rows]

    def ping(self) -> None:
        with self._tx():
            pass

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _path(url: str) -> str:
    """``sqlite:///relative`` or ``sqlite:////absolute``, as SQLAlchemy spells them."""
    scheme, _, rest = url.partition("://")
    location = rest.partition("?")[0]
    fix = "write sqlite:///relative/path or sqlite:////absolute/path"
    if scheme.lower() != "sqlite":
        raise config_error(url, "the scheme is not sqlite", fix)
    if ":memory:" in location or location.startswith("/file:"):
        raise config_error(url, "an in-memory database is private to one process", fix)
    if not location.startswith("/") or location in ("/", "//"):
        raise config_error(url, "it names no file path (or names a host)", fix)
    path = Path(location[1:]).absolute()
    if path.is_dir():
        raise config_error(url, f"{path} is a directory", fix)
    if not path.parent.is_dir():
        raise config_error(url, f"the directory {path.parent} does not exist", "create it")
    return str(path)
