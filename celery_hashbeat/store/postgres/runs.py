"""Run leases in PostgreSQL (docs/design.md §12): the task now queued or running for an entry.

A guarded claim takes one inside its own transaction (``holders`` and ``grant``), a give-back drops
it (``drop``); the worker that runs the task holds, renews and releases it through the rest. Each
is one statement that decides and writes at once, timed on the server's clock. A worker's call
first takes the lease row FOR SHARE: workers do not wait for each other, but a claim (which holds
that row FOR UPDATE between reading the run leases and granting one) never interleaves with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from celery_hashbeat.store.options import check_ttl
from celery_hashbeat.store.postgres.clock import LATER
from celery_hashbeat.store.postgres.connection import Database
from celery_hashbeat.store.postgres.schema import Tables


class RunLeases:
    """The run leases of one prefix; PostgresStore hands its run-lease calls here."""

    def __init__(self, database: Database, tables: Tables) -> None:
        self._database = database
        self._running = tables.running
        self._lease = tables.lease

    def _queue(self, cur: Any) -> None:
        cur.execute(f"SELECT 1 FROM {self._lease} FOR SHARE")

    def holders(self, cur: Any, entries: list[str] | None) -> dict[str, str]:
        """The live run leases of ``entries`` (all when None): entry -> task id."""
        query = f"SELECT entry, task_id FROM {self._running} WHERE expires_at > clock_timestamp()"
        if entries is None:
            cur.execute(query)
        else:
            cur.execute(f"{query} AND entry = ANY(%b)", (entries,))
        return dict(cur.fetchall())

    def grant(self, cur: Any, entry: str, task_id: str, ttl_ms: int) -> None:
        """Give ``entry``'s run lease to ``task_id`` for ``ttl_ms``, whoever held it."""
        cur.execute(
            f"INSERT INTO {self._running} (entry, task_id, expires_at) VALUES (%s, %s, {LATER})"
            " ON CONFLICT (entry) DO UPDATE"
            " SET task_id = excluded.task_id, expires_at = excluded.expires_at",
            (entry, task_id, ttl_ms),
        )

    def drop(self, cur: Any, entry: str, task_id: str) -> bool:
        """Drop ``entry``'s run lease if ``task_id`` holds it."""
        cur.execute(
            f"DELETE FROM {self._running} WHERE entry = %s AND task_id = %s", (entry, task_id)
        )
        return bool(cur.rowcount)

    def hold_run(self, entry: str, task_id: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        with self._database.transaction() as cur:
            self._queue(cur)
            cur.execute(
                f"INSERT INTO {self._running} AS r (entry, task_id, expires_at)"
                f" VALUES (%s, %s, {LATER}) ON CONFLICT (entry) DO UPDATE"
                " SET task_id = excluded.task_id, expires_at = excluded.expires_at"
                " WHERE r.task_id = excluded.task_id OR r.expires_at <= clock_timestamp()",
                (entry, task_id, ttl_ms),
            )
            return bool(cur.rowcount)

    def renew_runs(self, runs: Mapping[str, str], ttl_ms: int) -> set[str]:
        check_ttl(ttl_ms)
        if not runs:
            return set()
        with self._database.transaction() as cur:
            self._queue(cur)
            cur.execute(
                f"UPDATE {self._running} AS r SET expires_at = {LATER}"
                " FROM unnest(%b::text[], %b::text[]) AS given (entry, task_id)"
                " WHERE r.entry = given.entry AND r.task_id = given.task_id"
                " AND r.expires_at > clock_timestamp() RETURNING r.entry",
                (ttl_ms, list(runs), list(runs.values())),
            )
            return {row[0] for row in cur.fetchall()}

    def release_run(self, entry: str, task_id: str) -> bool:
        with self._database.transaction() as cur:
            self._queue(cur)
            return self.drop(cur, entry, task_id)

    def running(self, entries: Iterable[str] | None = None) -> dict[str, str]:
        with self._database.transaction() as cur:
            return self.holders(cur, None if entries is None else list(entries))
