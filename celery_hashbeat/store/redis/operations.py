"""The operators' records (store/operations.py) on Redis: the audit trail and the running
schedules, each write one Lua script (store/redis/scripts/)."""

from __future__ import annotations

from celery_hashbeat.store.operations import (
    AUDIT_KEEP,
    AUDIT_KEEP_MS,
    SCHEDULES_KEPT,
    OperatorRecords,
)
from celery_hashbeat.store.redis.connect import Connection
from celery_hashbeat.store.redis.keys import Keys
from celery_hashbeat.store.redis.scripts.operations import (
    RECORD_SCHEDULE_SCRIPT,
    WRITE_AUDIT_SCRIPT,
)


class RedisOperatorRecords(OperatorRecords):
    """The audit trail and running schedules of one prefix on Redis."""

    def __init__(self, connection: Connection, keys: Keys) -> None:
        self._redis = connection
        self._keys = keys
        self._write_audit = connection.script(WRITE_AUDIT_SCRIPT)
        self._record_schedule = connection.script(RECORD_SCHEDULE_SCRIPT)

    def write_audit(self, record: str, keep: int = AUDIT_KEEP, keep_ms: int = AUDIT_KEEP_MS) -> int:
        return int(self._redis.run(self._write_audit, [self._keys.audit], [record, keep, keep_ms]))

    def audit_trail(self, limit: int = AUDIT_KEEP) -> list[tuple[int, str]]:
        with self._redis.talking():
            stored = self._redis.client.lrange(self._keys.audit, -limit, -1) if limit > 0 else []
        return [pair for pair in map(_stamped, reversed(stored)) if pair is not None]

    def record_schedule(self, digest: str, definitions: str) -> None:
        keys = [self._keys.schedules]
        self._redis.run(self._record_schedule, keys, [digest, definitions, SCHEDULES_KEPT])

    def schedules(self) -> dict[str, str]:
        with self._redis.talking():
            stored = self._redis.client.hgetall(self._keys.schedules)
        return {digest: pair[1] for digest, value in stored.items() if (pair := _stamped(value))}


def _stamped(value: str) -> tuple[int, str] | None:
    """``<ms>|<text>`` read back; None for a value written by hand that is not."""
    at, bar, text = value.partition("|")
    return (int(at), text) if bar and at.isdigit() else None
