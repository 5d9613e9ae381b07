"""The operators' records (store/operations.py) in SQLite: the audit trail and the running
schedules, each write one transaction. Their tables are in store/sqlite/schema.py."""

from __future__ import annotations

from celery_hashbeat.store.operations import (
    AUDIT_KEEP,
    AUDIT_KEEP_MS,
    SCHEDULES_KEPT,
    OperatorRecords,
)
from celery_hashbeat.store.sqlite.clock import wall_now_ms
from celery_hashbeat.store.sqlite.database import Database


class SQLiteOperatorRecords(OperatorRecords):
    """The audit trail and running schedules of one prefix in SQLite."""

    def __init__(self, database: Database, prefix: str) -> None:
        self._database = database
        self._prefix = prefix

    def write_audit(self, record: str, keep: int = AUDIT_KEEP, keep_ms: int = AUDIT_KEEP_MS) -> int:
        now = wall_now_ms()
        with self._database.transaction() as db:
            db.execute(
                "INSERT INTO hashbeat_audit (prefix, at_ms, record) VALUES (?, ?, ?)",
                (self._prefix, now, record),
            )
            db.execute(
                "DELETE FROM hashbeat_audit WHERE prefix = ? AND (at_ms < ? OR id <= (SELECT id"
                " FROM hashbeat_audit WHERE prefix = ? ORDER BY id DESC LIMIT 1 OFFSET ?))",
                (self._prefix, now - keep_ms, self._prefix, keep),
            )
        return now

    def audit_trail(self, limit: int = AUDIT_KEEP) -> list[tuple[int, str]]:
        with self._database.transaction(write=False) as db:
            rows = db.execute(
                "SELECT at_ms, record FROM hashbeat_audit WHERE prefix = ? ORDER BY id DESC"
                " LIMIT ?",
                (self._prefix, max(limit, 0)),
            ).fetchall()
        return [(int(at), str(record)) for at, record in rows]

    def record_schedule(self, digest: str, definitions: str) -> None:
        with self._database.transaction() as db:
            db.execute(
                "INSERT INTO hashbeat_schedules (prefix, digest, at_ms, definitions)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (prefix, digest) DO UPDATE SET"
                " at_ms = excluded.at_ms, definitions = excluded.definitions",
                (self._prefix, digest, wall_now_ms(), definitions),
            )
            db.execute(
                "DELETE FROM hashbeat_schedules WHERE prefix = ? AND digest NOT IN (SELECT digest"
                " FROM hashbeat_schedules WHERE prefix = ? ORDER BY at_ms DESC LIMIT ?)",
                (self._prefix, self._prefix, SCHEDULES_KEPT),
            )

    def schedules(self) -> dict[str, str]:
        with self._database.transaction(write=False) as db:
            rows = db.execute(
                "SELECT digest, definitions FROM hashbeat_schedules WHERE prefix = ?",
                (self._prefix,),
            ).fetchall()
        return {str(digest): str(text) for digest, text in rows}
