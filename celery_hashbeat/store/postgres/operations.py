"""The operators' records (store/operations.py) in PostgreSQL: the audit trail and the running
schedules, each write one transaction, stamped with the server's clock. Their tables are in
store/postgres/schema.py."""

from __future__ import annotations

from celery_hashbeat.store.operations import (
    AUDIT_KEEP,
    AUDIT_KEEP_MS,
    SCHEDULES_KEPT,
    OperatorRecords,
)
from celery_hashbeat.store.postgres.clock import NOW_MS
from celery_hashbeat.store.postgres.connection import Database
from celery_hashbeat.store.postgres.schema import Tables


class PostgresOperatorRecords(OperatorRecords):
    """The audit trail and running schedules of one prefix in PostgreSQL."""

    def __init__(self, database: Database, tables: Tables) -> None:
        self._database = database
        self._t = tables

    def write_audit(self, record: str, keep: int = AUDIT_KEEP, keep_ms: int = AUDIT_KEEP_MS) -> int:
        audit = self._t.audit
        with self._database.transaction() as cur:
            cur.execute(
                f"INSERT INTO {audit} (at_ms, record) VALUES ({NOW_MS}, %s) RETURNING id, at_ms",
                (record,),
            )
            newest, at_ms = cur.fetchone()
            cur.execute(
                f"DELETE FROM {audit} WHERE id <= %s OR at_ms < %s",
                (int(newest) - keep, int(at_ms) - keep_ms),
            )
        return int(at_ms)

    def audit_trail(self, limit: int = AUDIT_KEEP) -> list[tuple[int, str]]:
        with self._database.transaction() as cur:
            cur.execute(
                f"SELECT at_ms, record FROM {self._t.audit} ORDER BY id DESC LIMIT %s",
                (max(limit, 0),),
            )
            rows = cur.fetchall()
        return [(int(at), str(record)) for at, record in rows]

    def record_schedule(self, digest: str, definitions: str) -> None:
        schedules = self._t.schedules
        with self._database.transaction() as cur:
            cur.execute(
                f"INSERT INTO {schedules} (digest, at_ms, definitions) VALUES (%s, {NOW_MS}, %s)"
                " ON CONFLICT (digest) DO UPDATE SET at_ms = excluded.at_ms,"
                " definitions = excluded.definitions",
                (digest, definitions),
            )
            cur.execute(
                f"DELETE FROM {schedules} WHERE digest NOT IN (SELECT digest FROM {schedules}"
                " ORDER BY at_ms DESC LIMIT %s)",
                (SCHEDULES_KEPT,),
            )

    def schedules(self) -> dict[str, str]:
        with self._database.transaction() as cur:
            cur.execute(f"SELECT digest, definitions FROM {self._t.schedules}")
            rows = cur.fetchall()
        return {str(digest): str(text) for digest, text in rows}
