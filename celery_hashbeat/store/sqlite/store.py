"""The one-host store: a SQLite file that the beat processes of one host share.

Its parts, each in its own module of store/sqlite/: the tables (schema.py), the file and its
transactions (database.py), when a row is live (clock.py), run leases (runs.py), the runtime
controls (controls.py). This module speaks the protocol (store/base.py) over them: the lease,
fenced claims, shared documents, history and heartbeats, each change one transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

from celery_hashbeat.store.base import HANDOVER_KEEP_MS, HISTORY_CAP, History, Store
from celery_hashbeat.store.fencing import (
    Row,
    plan_anchors,
    plan_claim,
    plan_give_back,
    plan_hand_over,
)
from celery_hashbeat.store.options import (
    check_digest,
    check_guard,
    check_prefix,
    check_token,
    check_ttl,
)
from celery_hashbeat.store.sqlite import sent
from celery_hashbeat.store.sqlite.clock import BOOT, LIVE, lease_now_ms, wall_now_ms
from celery_hashbeat.store.sqlite.controls import SQLiteControlRecords
from celery_hashbeat.store.sqlite.database import Database, chunks
from celery_hashbeat.store.sqlite.lifetimes import (
    LAPSED,
    purge_histories,
    refresh_histories,
    retire_histories,
)
from celery_hashbeat.store.sqlite.operations import SQLiteOperatorRecords
from celery_hashbeat.store.sqlite.runs import RunLeases
from celery_hashbeat.store.sqlite.sent import SQLiteSentRecords
from celery_hashbeat.store.values import BeatInfo, Claimed, Fence, LeaseInfo, RunGuard


class SQLiteStore(Store):
    """The coordination protocol in a SQLite file; its options are the file's (Database)."""

    def __init__(self, url: str, prefix: str = "hashbeat", **options: object) -> None:
        self._prefix = check_prefix(prefix)
        self._database = Database(url, options)
        #: The SQLite file's absolute path.
        self.path = self._database.path
        self._runs = RunLeases(self._database, self._prefix)
        super().__init__(
            url,
            SQLiteControlRecords(self._database, self._prefix, self._holds),
            SQLiteOperatorRecords(self._database, self._prefix),
            SQLiteSentRecords(self._database, self._prefix, self._holds),
        )

    def _holds(self, db: sqlite3.Connection, token: str) -> bool:
        holder = self._holder(db)
        return holder is not None and holder[0] == token

    def _holder(self, db: sqlite3.Connection) -> tuple[str, int] | None:
        """The live lease's token and its time left (ms), or None."""
        now = lease_now_ms()
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
            for chunk, marks in chunks(entries):
                query = f"{columns} WHERE prefix = ? AND entry IN ({marks})"
                rows += db.execute(query, (self._prefix, *chunk))
        counts = {row[0]: int(row[5]) for row in rows if row[5]}
        stored = ((row[0], "|".join(map(str, row[1:5]))) for row in rows)
        return self._parse_stored(stored, counts)

    def _write(self, db: sqlite3.Connection, rows: Iterable[Row]) -> None:
        db.executemany(
            "INSERT OR REPLACE INTO hashbeat_fired (prefix, entry, slot, token, previous,"
            " fingerprint, runs) VALUES (?, ?, ?, ?, ?, ?, ?)",
            ((self._prefix, *row) for row in rows),
        )

    def acquire(self, token: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        check_token(token)
        with self._database.transaction() as db:
            holder = self._holder(db)
            if holder is not None:
                return holder[0] == token
            db.execute(
                "INSERT OR REPLACE INTO hashbeat_lease (prefix, token, expires_ms, boot, ttl_ms)"
                " VALUES (?, ?, ?, ?, ?)",
                (self._prefix, token, lease_now_ms() + ttl_ms, BOOT, ttl_ms),
            )
            return True

    def renew(self, token: str, ttl_ms: int, history: History = ()) -> bool:
        check_ttl(ttl_ms)
        with self._database.transaction() as db:
            self._record(db, history)
            if not self._holds(db, token):
                return False
            db.execute(
                "UPDATE hashbeat_lease SET expires_ms = ?, ttl_ms = ? WHERE prefix = ?",
                (lease_now_ms() + ttl_ms, ttl_ms, self._prefix),
            )
            return True

    def release(self, token: str) -> bool:
        with self._database.transaction() as db:
            if not self._holds(db, token):
                return False
            db.execute("DELETE FROM hashbeat_lease WHERE prefix = ?", (self._prefix,))
            db.execute(
                "DELETE FROM hashbeat_beats WHERE prefix = ? AND token = ?", (self._prefix, token)
            )
            return True

    def leader(self) -> LeaseInfo | None:
        with self._database.transaction(write=False) as db:
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
        with self._database.transaction() as db:
            self._record(db, history)
            if not self._holds(db, token):
                return Claimed()
            stored = self._stored(db, list(slots))
            holders = self._runs.holders(db, [entry for entry in slots if entry in runs])
            pairs = ((e, int(s)) for e, (s, _) in slots.items())
            recorded = set(sent.check(db, self._prefix, pairs))
            plan = plan_claim(token, slots, runs, stored, holders, recorded)
            for entry, guard in plan.grants:
                self._runs.grant(db, entry, guard.task_id, guard.ttl_ms)
            self._write(db, plan.rows)
            sent.record(db, self._prefix, (row[:2] for row in plan.rows))
            self._keep_claims(db, plan.moved_past)
        return plan.claimed

    def _keep_claims(self, db: sqlite3.Connection, claims: list[tuple[str, int, str]]) -> None:
        """Keep (entry, slot, token) claims that a later claim moved past, so that their
        claimers can still hand them over; forget those older than HANDOVER_KEEP_MS."""
        now = wall_now_ms()
        db.execute(
            "DELETE FROM hashbeat_claimed WHERE prefix = ? AND recorded_ms < ?",
            (self._prefix, now - HANDOVER_KEEP_MS),
        )
        db.executemany(
            "INSERT OR REPLACE INTO hashbeat_claimed (prefix, entry, slot, token, recorded_ms)"
            " VALUES (?, ?, ?, ?, ?)",
            ((self._prefix, entry, slot, token, now) for entry, slot, token in claims),
        )

    def hand_over(self, token: str, slots: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        check_token(token)
        wanted = [(entry, int(slot)) for entry, slot in slots]
        if not wanted:
            return set()
        with self._database.transaction() as db:
            stored = self._stored(db, sorted({entry for entry, _ in wanted}))
            by_fence, by_kept = plan_hand_over(token, wanted, stored)
            handed = set(by_fence)
            # The proof is used up: the fence no longer names its claimer.
            db.executemany(
                "UPDATE hashbeat_fired SET token = '-' WHERE prefix = ? AND entry = ?",
                ((self._prefix, entry) for entry, _ in by_fence),
            )
            for entry, slot in by_kept:
                deleted = db.execute(
                    "DELETE FROM hashbeat_claimed WHERE prefix = ? AND entry = ? AND slot = ?"
                    " AND token = ?",
                    (self._prefix, entry, slot, token),
                )
                if deleted.rowcount:
                    handed.add((entry, slot))
            db.executemany(
                "INSERT OR IGNORE INTO hashbeat_handed (prefix, entry, slot) VALUES (?, ?, ?)",
                ((self._prefix, entry, slot) for entry, slot in handed),
            )
        return handed

    def take_handed(self, token: str) -> list[tuple[str, int]]:
        check_token(token)
        with self._database.transaction() as db:
            if not self._holds(db, token):
                return []
            taken = [
                (entry, int(slot))
                for entry, slot in db.execute(
                    "SELECT entry, slot FROM hashbeat_handed WHERE prefix = ? ORDER BY slot, entry",
                    (self._prefix,),
                )
            ]
            db.execute("DELETE FROM hashbeat_handed WHERE prefix = ?", (self._prefix,))
            self._keep_claims(db, [(entry, slot, token) for entry, slot in taken])
        return taken

    def unclaim(
        self, token: str, slots: Mapping[str, int], runs: Mapping[str, str] | None = None
    ) -> set[str]:
        if not slots:
            return set()
        with self._database.transaction() as db:
            if not self._holds(db, token):
                return set()
            for entry, task_id in (runs or {}).items():
                if entry in slots:
                    self._runs.drop(db, entry, task_id)
            given, restored = plan_give_back(token, slots, self._rows(db, list(slots)))
            db.executemany(
                "DELETE FROM hashbeat_fired WHERE prefix = ? AND entry = ?",
                ((self._prefix, entry) for entry in given),
            )
            self._write(db, restored)
            sent.drop(db, self._prefix, ((entry, slots[entry]) for entry in given))
        return given

    def anchor(self, token: str, anchors: Mapping[str, tuple[int, str]]) -> dict[str, Fence]:
        if not anchors:
            return {}
        with self._database.transaction() as db:
            if not self._holds(db, token):
                return {}
            fences, rows = plan_anchors(anchors, self._stored(db, list(anchors)))
            self._write(db, rows)
        return fences

    def fences(self, entries: Iterable[str] | None = None) -> dict[str, Fence]:
        with self._database.transaction(write=False) as db:
            return self._stored(db, None if entries is None else list(entries))

    def forget(self, token: str, entries: Iterable[str]) -> bool:
        entries = list(entries)  # read before the write lock is taken
        with self._database.transaction() as db:
            if not self._holds(db, token):
                return False
            db.executemany(
                "DELETE FROM hashbeat_fired WHERE prefix = ? AND entry = ?",
                ((self._prefix, entry) for entry in entries),
            )
            retire_histories(db, self._prefix, entries)
            return True

    def hold_run(self, entry: str, task_id: str, ttl_ms: int) -> bool:
        return self._runs.hold_run(entry, task_id, ttl_ms)

    def renew_runs(self, runs: Mapping[str, str], ttl_ms: int) -> set[str]:
        return self._runs.renew_runs(runs, ttl_ms)

    def release_run(self, entry: str, task_id: str) -> bool:
        return self._runs.release_run(entry, task_id)

    def running(self, entries: Iterable[str] | None = None) -> dict[str, str]:
        return self._runs.running(entries)

    def shared(self, name: str) -> str | None:
        with self._database.transaction(write=False) as db:
            row = db.execute(
                "SELECT value FROM hashbeat_shared WHERE prefix = ? AND name = ?",
                (self._prefix, name),
            ).fetchone()
        return None if row is None else str(row[0])

    def share(self, token: str, name: str, value: str) -> bool:
        with self._database.transaction() as db:
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
        purge_histories(db, self._prefix)  # a lapsed history is not written onto
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
        refresh_histories(db, self._prefix, (entry for entry, _ in history))

    def record(self, history: History) -> None:
        if not history:
            return
        with self._database.transaction() as db:
            self._record(db, history)

    def history(self, entry: str, limit: int = HISTORY_CAP) -> list[str]:
        if limit <= 0:
            return []
        with self._database.transaction(write=False) as db:
            rows = db.execute(
                "SELECT record FROM hashbeat_history WHERE prefix = ? AND entry = ?"
                f" AND NOT {LAPSED} ORDER BY id DESC LIMIT ?",
                (self._prefix, entry, self._prefix, entry, wall_now_ms(), limit),
            )
            return [row[0] for row in rows]

    def heartbeat(self, token: str, role: str, ttl_ms: int, schedule_digest: str = "") -> None:
        check_ttl(ttl_ms)
        check_digest(schedule_digest)  # as Redis requires, so a digest works in either store
        with self._database.transaction() as db:
            purge_histories(db, self._prefix)
            now = lease_now_ms()
            db.execute(
                f"DELETE FROM hashbeat_beats WHERE prefix = ? AND NOT ({LIVE})",
                (self._prefix, BOOT, now, now),
            )
            db.execute(
                "INSERT OR REPLACE INTO hashbeat_beats (prefix, token, role, last_seen_ms,"
                " expires_ms, digest, boot, ttl_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self._prefix,
                    token,
                    role,
                    wall_now_ms(),
                    now + ttl_ms,
                    schedule_digest,
                    BOOT,
                    ttl_ms,
                ),
            )

    def beats(self) -> list[BeatInfo]:
        now = lease_now_ms()
        with self._database.transaction(write=False) as db:
            rows = db.execute(
                "SELECT token, last_seen_ms, role, digest FROM hashbeat_beats"
                f" WHERE prefix = ? AND {LIVE} ORDER BY last_seen_ms DESC, token",
                (self._prefix, BOOT, now, now),
            )
            return [BeatInfo(*row) for row in rows]

    def ping(self) -> None:
        with self._database.transaction():
            pass

    def close(self) -> None:
        self._database.close()
