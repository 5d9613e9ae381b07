"""The one-host store: a SQLite file that the beat processes of one host share.

Every change is one ``BEGIN IMMEDIATE`` transaction, which takes the file's write lock up front,
so two processes never interleave a check and its write. Several prefixes may share one file.

The lease and the heartbeats expire on the host's monotonic clock, which every process of one
boot shares and no clock step moves (a wall-clock step would otherwise stretch or cut the lease,
or hide live beats). That clock restarts at boot, so each row also records the boot it was
written in and the TTL it was given: it is live only in the same boot and while its expiry is
ahead by no more than that TTL. The boot id alone is exact on Linux; the TTL bound alone is safe
where there is no boot id (an old lease can then look held for at most one TTL after a reboot,
and its holder died with that boot). A boot id guessed from the wall clock would not do: two
processes could guess apart and both take the lease. ``last_seen_ms``, shown to people, stays
wall-clock milliseconds.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from celery_hashbeat.store.base import (
    HISTORY_CAP,
    BeatInfo,
    Claimed,
    Fence,
    History,
    LeaseInfo,
    RunGuard,
    Store,
    StoreUnavailable,
)
from celery_hashbeat.store.options import (
    DEFAULT_TIMEOUT_S,
    Options,
    check_digest,
    check_guard,
    check_prefix,
    check_token,
    check_ttl,
    config_error,
)
from celery_hashbeat.store.sqlite.controls import CONTROL_SCHEMA, SQLiteControlRecords

# expires_ms is on the monotonic clock of the boot named by boot (see the module's docstring).
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS hashbeat_lease (prefix TEXT PRIMARY KEY, token TEXT NOT NULL,"
    " expires_ms INTEGER NOT NULL, boot TEXT NOT NULL DEFAULT '', ttl_ms INTEGER NOT NULL"
    " DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS hashbeat_fired (prefix TEXT NOT NULL, entry TEXT NOT NULL,"
    " slot INTEGER NOT NULL, token TEXT NOT NULL DEFAULT '-', previous TEXT NOT NULL DEFAULT '',"
    " fingerprint TEXT NOT NULL DEFAULT '', runs INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY (prefix, entry)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS hashbeat_beats (prefix TEXT NOT NULL, token TEXT NOT NULL,"
    " role TEXT NOT NULL, last_seen_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL,"
    " digest TEXT NOT NULL DEFAULT '', boot TEXT NOT NULL DEFAULT '', ttl_ms INTEGER NOT NULL"
    " DEFAULT 0, PRIMARY KEY (prefix, token)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS hashbeat_running (prefix TEXT NOT NULL, entry TEXT NOT NULL,"
    " task_id TEXT NOT NULL, expires_ms INTEGER NOT NULL, boot TEXT NOT NULL, ttl_ms INTEGER"
    " NOT NULL, PRIMARY KEY (prefix, entry)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS hashbeat_shared (prefix TEXT NOT NULL, name TEXT NOT NULL,"
    " value TEXT NOT NULL, PRIMARY KEY (prefix, name)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS hashbeat_history (id INTEGER PRIMARY KEY, prefix TEXT NOT NULL,"
    " entry TEXT NOT NULL, record TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS hashbeat_history_entry ON hashbeat_history (prefix, entry, id)",
)

#: Columns added since schema 1 (release 0.1), added in place to an older file; its fences read
#: as claims by an unknown beat, and its wall-clock leases and heartbeats (a TTL of 0) lapse.
ADDED_COLUMNS = {
    "hashbeat_lease": ("boot TEXT NOT NULL DEFAULT ''", "ttl_ms INTEGER NOT NULL DEFAULT 0"),
    "hashbeat_fired": (
        "token TEXT NOT NULL DEFAULT '-'",
        "previous TEXT NOT NULL DEFAULT ''",
        "fingerprint TEXT NOT NULL DEFAULT ''",
        "runs INTEGER NOT NULL DEFAULT 0",
    ),
    "hashbeat_beats": (
        "digest TEXT NOT NULL DEFAULT ''",
        "boot TEXT NOT NULL DEFAULT ''",
        "ttl_ms INTEGER NOT NULL DEFAULT 0",
    ),
}

#: A lease or heartbeat row that is live at the monotonic instant given twice after the boot id.
LIVE = "boot = ? AND expires_ms > ? AND expires_ms - ttl_ms <= ?"

SCHEMA_VERSION = 5

# Entries per ``IN (...)`` query: below the 999 bound parameters that older SQLite builds allow.
CHUNK = 500


def _now_ms() -> int:
    return int(time.time() * 1000)


def _lease_now() -> int:
    """Milliseconds on the host-wide monotonic clock that times leases and heartbeats."""
    return int(time.monotonic() * 1000)


def _boot_id() -> str:
    """This boot's identity (Linux); elsewhere "", leaving the TTL bound to spot a reboot."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


BOOT = _boot_id()


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
        self._prefix = check_prefix(prefix)
        super().__init__(url, SQLiteControlRecords(self._prefix, self._tx, self._holds))
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
            for statement in (*SCHEMA, *CONTROL_SCHEMA):
                self._db.execute(statement)
            for table, columns in ADDED_COLUMNS.items():
                present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
                for column in columns:
                    if column.split()[0] not in present:
                        self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
                        if table == "hashbeat_lease":
                            self._db.execute("DELETE FROM hashbeat_lease")
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

    def _holds(self, db: sqlite3.Connection, token: str) -> bool:
        holder = self._holder(db)
        return holder is not None and holder[0] == token

    def _holder(self, db: sqlite3.Connection) -> tuple[str, int] | None:
        """The live lease's token and its time left (ms), or None."""
        now = _lease_now()
        row = db.execute(
            f"SELECT token, expires_ms FROM hashbeat_lease WHERE prefix = ? AND {LIVE}",
            (self._prefix, BOOT, now, now),
        ).fetchone()
        return None if row is None else (row[0], row[1] - now)

    def _stored(self, db: sqlite3.Connection, entries: list[str] | None) -> dict[str, Fence]:
        """The readable fences of ``entries`` (all when None)."""
        return {entry: fence for entry, (fence, _) in self._rows(db, entries).items()}

    def _rows(
        self, db: sqlite3.Connection, entries: list[str] | None
    ) -> dict[str, tuple[Fence, str]]:
        """The readable fences of ``entries`` with their ``previous``, rows given back as the
        text the Redis store keeps, so one parser reads both."""
        columns = "SELECT entry, slot, token, previous, fingerprint, runs FROM hashbeat_fired"
        if entries is None:
            rows = list(db.execute(f"{columns} WHERE prefix = ?", (self._prefix,)))
        else:
            rows = []
            for start in range(0, len(entries), CHUNK):
                chunk = entries[start : start + CHUNK]
                rows += db.execute(
                    f"{columns} WHERE prefix = ? AND entry IN ({', '.join('?' * len(chunk))})",
                    (self._prefix, *chunk),
                )
        counts = {row[0]: int(row[5]) for row in rows if row[5]}
        stored = ((row[0], "|".join(map(str, row[1:5]))) for row in rows)
        return self._parse_stored(stored, counts)

    def _write(
        self, db: sqlite3.Connection, rows: Iterable[tuple[str, int, str, str, str, int]]
    ) -> None:
        db.executemany(
            "INSERT OR REPLACE INTO hashbeat_fired (prefix, entry, slot, token, previous,"
            " fingerprint, runs) VALUES (?, ?, ?, ?, ?, ?, ?)",
            ((self._prefix, *row) for row in rows),
        )

    def acquire(self, token: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        check_token(token)
        with self._tx() as db:
            holder = self._holder(db)
            if holder is not None:
                return holder[0] == token
            db.execute(
                "INSERT OR REPLACE INTO hashbeat_lease (prefix, token, expires_ms, boot, ttl_ms)"
                " VALUES (?, ?, ?, ?, ?)",
                (self._prefix, token, _lease_now() + ttl_ms, BOOT, ttl_ms),
            )
            return True

    def renew(self, token: str, ttl_ms: int, history: History = ()) -> bool:
        check_ttl(ttl_ms)
        with self._tx() as db:
            self._record(db, history)
            if not self._holds(db, token):
                return False
            db.execute(
                "UPDATE hashbeat_lease SET expires_ms = ?, ttl_ms = ? WHERE prefix = ?",
                (_lease_now() + ttl_ms, ttl_ms, self._prefix),
            )
            return True

    def release(self, token: str) -> bool:
        with self._tx() as db:
            if not self._holds(db, token):
                return False
            db.execute("DELETE FROM hashbeat_lease WHERE prefix = ?", (self._prefix,))
            db.execute(
                "DELETE FROM hashbeat_beats WHERE prefix = ? AND token = ?", (self._prefix, token)
            )
            return True

    def leader(self) -> LeaseInfo | None:
        with self._tx(write=False) as db:
            holder = self._holder(db)
        return None if holder is None else LeaseInfo(*holder)

    def claim(
        self,
        token: str,
        slots: Mapping[str, tuple[int, str]],
        runs: Mapping[str, RunGuard] | None = None,
        history: History = (),
    ) -> Claimed:
        check_token(token)
        runs = runs or {}
        for each in runs.values():
            check_guard(each)
        if not slots:
            self.record(history)
            return Claimed()
        with self._tx() as db:
            self._record(db, history)
            if not self._holds(db, token):
                return Claimed()
            stored = self._stored(db, list(slots))
            holders = self._holders(db, [entry for entry in slots if entry in runs])
            result = Claimed()
            rows = []
            for entry, (slot, fingerprint) in slots.items():
                fence = stored.get(entry)
                mine = fence is not None and fence.slot == slot and fence.token == token
                if not (mine or fence is None or slot > fence.slot):
                    continue
                guard = runs.get(entry)
                holder = "" if guard is None else holders.get(entry, "")
                if guard is not None and holder == guard.task_id:
                    holder = ""
                if guard is not None and (not holder or guard.mode == "replace"):
                    self._set_run(db, entry, guard.task_id, guard.ttl_ms)
                if holder:
                    result.held[entry] = holder
                    if guard is not None and guard.mode == "buffer_one":
                        continue
                result.add(entry)
                if not mine:
                    previous = "" if fence is None else f"{'a' if fence.anchor else ''}{fence.slot}"
                    runs_before = 0 if fence is None else fence.runs
                    rows.append((entry, int(slot), token, previous, fingerprint, runs_before + 1))
            self._write(db, rows)
        return result

    def unclaim(
        self, token: str, slots: Mapping[str, int], runs: Mapping[str, str] | None = None
    ) -> set[str]:
        if not slots:
            return set()
        with self._tx() as db:
            if not self._holds(db, token):
                return set()
            for entry, task_id in (runs or {}).items():
                if entry in slots:
                    self._drop_run(db, entry, task_id)
            given: set[str] = set()
            restored = []
            for entry, (fence, previous) in self._rows(db, list(slots)).items():
                if fence.token != token or fence.slot != slots[entry]:
                    continue
                given.add(entry)
                if previous:
                    anchor = previous.startswith("a")
                    slot = int(previous.removeprefix("a"))
                    fingerprint = fence.fingerprint or ""
                    count = max(fence.runs - 1, 0)
                    restored.append((entry, slot, "" if anchor else "-", "", fingerprint, count))
            db.executemany(
                "DELETE FROM hashbeat_fired WHERE prefix = ? AND entry = ?",
                ((self._prefix, entry) for entry in given),
            )
            self._write(db, restored)
        return given

    def anchor(self, token: str, anchors: Mapping[str, tuple[int, str]]) -> dict[str, Fence]:
        if not anchors:
            return {}
        with self._tx() as db:
            if not self._holds(db, token):
                return {}
            stored = self._stored(db, list(anchors))
            rows = []
            for entry, (instant, fingerprint) in anchors.items():
                fence = stored.get(entry)
                if fence is None or fence.fingerprint not in (None, fingerprint):
                    count = 0 if fence is None else fence.runs
                    stored[entry] = Fence(int(instant), "", fingerprint, count)
                    rows.append((entry, int(instant), "", "", fingerprint, count))
            self._write(db, rows)
        return {entry: stored[entry] for entry in anchors}

    def fences(self, entries: Iterable[str] | None = None) -> dict[str, Fence]:
        with self._tx(write=False) as db:
            return self._stored(db, None if entries is None else list(entries))

    def forget(self, token: str, entries: Iterable[str]) -> bool:
        entries = list(entries)  # read before the write lock is taken
        with self._tx() as db:
            if not self._holds(db, token):
                return False
            db.executemany(
                "DELETE FROM hashbeat_fired WHERE prefix = ? AND entry = ?",
                ((self._prefix, entry) for entry in entries),
            )
            return True

    def _holders(self, db: sqlite3.Connection, entries: list[str] | None) -> dict[str, str]:
        """The live run leases of ``entries`` (all when None): entry -> task id."""
        now = _lease_now()
        query = f"SELECT entry, task_id FROM hashbeat_running WHERE prefix = ? AND {LIVE}"
        live = (self._prefix, BOOT, now, now)
        if entries is None:
            return dict(db.execute(query, live).fetchall())
        found: dict[str, str] = {}
        for start in range(0, len(entries), CHUNK):
            chunk = entries[start : start + CHUNK]
            found.update(
                db.execute(f"{query} AND entry IN ({', '.join('?' * len(chunk))})", (*live, *chunk))
            )
        return found

    def _set_run(self, db: sqlite3.Connection, entry: str, task_id: str, ttl_ms: int) -> None:
        db.execute(
            "INSERT OR REPLACE INTO hashbeat_running (prefix, entry, task_id, expires_ms, boot,"
            " ttl_ms) VALUES (?, ?, ?, ?, ?, ?)",
            (self._prefix, entry, task_id, _lease_now() + ttl_ms, BOOT, ttl_ms),
        )

    def _drop_run(self, db: sqlite3.Connection, entry: str, task_id: str) -> bool:
        deleted = db.execute(
            "DELETE FROM hashbeat_running WHERE prefix = ? AND entry = ? AND task_id = ?",
            (self._prefix, entry, task_id),
        )
        return deleted.rowcount > 0

    def hold_run(self, entry: str, task_id: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        with self._tx() as db:
            holder = self._holders(db, [entry]).get(entry)
            if holder is not None and holder != task_id:
                return False
            self._set_run(db, entry, task_id, ttl_ms)
            return True

    def renew_runs(self, runs: Mapping[str, str], ttl_ms: int) -> set[str]:
        check_ttl(ttl_ms)
        if not runs:
            return set()
        with self._tx() as db:
            holders = self._holders(db, list(runs))
            renewed = {entry for entry, task_id in runs.items() if holders.get(entry) == task_id}
            for entry in renewed:
                self._set_run(db, entry, runs[entry], ttl_ms)
            return renewed

    def release_run(self, entry: str, task_id: str) -> bool:
        with self._tx() as db:
            return self._drop_run(db, entry, task_id)

    def running(self, entries: Iterable[str] | None = None) -> dict[str, str]:
        with self._tx(write=False) as db:
            return self._holders(db, None if entries is None else list(entries))

    def shared(self, name: str) -> str | None:
        with self._tx(write=False) as db:
            row = db.execute(
                "SELECT value FROM hashbeat_shared WHERE prefix = ? AND name = ?",
                (self._prefix, name),
            ).fetchone()
        return None if row is None else str(row[0])

    def share(self, token: str, name: str, value: str) -> bool:
        with self._tx() as db:
            if not self._holds(db, token):
                return False
            db.execute(
                "INSERT OR REPLACE INTO hashbeat_shared (prefix, name, value) VALUES (?, ?, ?)",
                (self._prefix, name, value),
            )
            return True

    def _record(self, db: sqlite3.Connection, history: History) -> None:
        """Append to the histories and trim each one written to its newest HISTORY_CAP."""
        if not history:
            return
        db.executemany(
            "INSERT INTO hashbeat_history (prefix, entry, record) VALUES (?, ?, ?)",
            ((self._prefix, entry, record) for entry, record in history),
        )
        db.executemany(
            "DELETE FROM hashbeat_history WHERE prefix = ? AND entry = ? AND id <= (SELECT id"
            " FROM hashbeat_history WHERE prefix = ? AND entry = ? ORDER BY id DESC LIMIT 1"
            " OFFSET ?)",
            (
                (self._prefix, entry, self._prefix, entry, HISTORY_CAP)
                for entry in {entry for entry, _ in history}
            ),
        )

    def record(self, history: History) -> None:
        if not history:
            return
        with self._tx() as db:
            self._record(db, history)

    def history(self, entry: str, limit: int = HISTORY_CAP) -> list[str]:
        if limit <= 0:
            return []
        with self._tx(write=False) as db:
            rows = db.execute(
                "SELECT record FROM hashbeat_history WHERE prefix = ? AND entry = ?"
                " ORDER BY id DESC LIMIT ?",
                (self._prefix, entry, limit),
            )
            return [row[0] for row in rows]

    def heartbeat(self, token: str, role: str, ttl_ms: int, schedule_digest: str = "") -> None:
        check_ttl(ttl_ms)
        check_digest(schedule_digest)  # as Redis requires, so a digest works in either store
        with self._tx() as db:
            now = _lease_now()
            db.execute(
                f"DELETE FROM hashbeat_beats WHERE prefix = ? AND NOT ({LIVE})",
                (self._prefix, BOOT, now, now),
            )
            db.execute(
                "INSERT OR REPLACE INTO hashbeat_beats (prefix, token, role, last_seen_ms,"
                " expires_ms, digest, boot, ttl_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (self._prefix, token, role, _now_ms(), now + ttl_ms, schedule_digest, BOOT, ttl_ms),
            )

    def beats(self) -> list[BeatInfo]:
        now = _lease_now()
        with self._tx(write=False) as db:
            rows = db.execute(
                "SELECT token, last_seen_ms, role, digest FROM hashbeat_beats"
                f" WHERE prefix = ? AND {LIVE} ORDER BY last_seen_ms DESC, token",
                (self._prefix, BOOT, now, now),
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
