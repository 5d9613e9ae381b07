"""Run leases in SQLite (docs/design.md §12): the task now queued or running for an entry.

A guarded claim takes one inside its own transaction (``holders`` and ``grant``), a give-back drops
it (``drop``); the worker that runs the task holds, renews and releases it through the rest.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping

from celery_hashbeat.store.options import check_ttl
from celery_hashbeat.store.sqlite.clock import BOOT, LIVE, lease_now_ms
from celery_hashbeat.store.sqlite.database import Database, chunks


class RunLeases:
    """The run leases of one prefix; SQLiteStore hands its run-lease calls here."""

    def __init__(self, database: Database, prefix: str) -> None:
        self._database = database
        self._prefix = prefix

    def holders(self, db: sqlite3.Connection, entries: list[str] | None) -> dict[str, str]:
        """The live run leases of ``entries`` (all when None): entry -> task id."""
        now = lease_now_ms()
        query = f"SELECT entry, task_id FROM hashbeat_running WHERE prefix = ? AND {LIVE}"
        live = (self._prefix, BOOT, now, now)
        if entries is None:
            return dict(db.execute(query, live).fetchall())
        found: dict[str, str] = {}
        for chunk, marks in chunks(entries):
            found.update(db.execute(f"{query} AND entry IN ({marks})", (*live, *chunk)))
        return found

    def grant(self, db: sqlite3.Connection, entry: str, task_id: str, ttl_ms: int) -> None:
        """Give ``entry``'s run lease to ``task_id`` for ``ttl_ms``, whoever held it."""
        db.execute(
            "INSERT OR REPLACE INTO hashbeat_running (prefix, entry, task_id, expires_ms, boot,"
            " ttl_ms) VALUES (?, ?, ?, ?, ?, ?)",
            (self._prefix, entry, task_id, lease_now_ms() + ttl_ms, BOOT, ttl_ms),
        )

    def drop(self, db: sqlite3.Connection, entry: str, task_id: str) -> bool:
        """Drop ``entry``'s run lease if ``task_id`` holds it."""
        deleted = db.execute(
            "DELETE FROM hashbeat_running WHERE prefix = ? AND entry = ? AND task_id = ?",
            (self._prefix, entry, task_id),
        )
        return deleted.rowcount > 0

    def hold_run(self, entry: str, task_id: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        with self._database.transaction() as db:
            holder = self.holders(db, [entry]).get(entry)
            if holder is not None and holder != task_id:
                return False
            self.grant(db, entry, task_id, ttl_ms)
            return True

    def renew_runs(self, runs: Mapping[str, str], ttl_ms: int) -> set[str]:
        check_ttl(ttl_ms)
        if not runs:
            return set()
        with self._database.transaction() as db:
            holders = self.holders(db, list(runs))
            renewed = {entry for entry, task_id in runs.items() if holders.get(entry) == task_id}
            for entry in renewed:
                self.grant(db, entry, runs[entry], ttl_ms)
            return renewed

    def release_run(self, entry: str, task_id: str) -> bool:
        with self._database.transaction() as db:
            return self.drop(db, entry, task_id)

    def running(self, entries: Iterable[str] | None = None) -> dict[str, str]:
        with self._database.transaction(write=False) as db:
            return self.holders(db, None if entries is None else list(entries))
