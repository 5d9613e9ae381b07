"""The runtime controls (store/controls.py) in PostgreSQL, each change one transaction.

Their tables are in store/postgres/schema.py. The version is the ``version`` row of the prefix's
meta table, raised with ``UPDATE ... RETURNING`` so that two writers queue on that row and never
hand out one version twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from celery_hashbeat.store.controls import (
    DEFINITION,
    PAUSE,
    Changes,
    ControlRecords,
    Taken,
    check_values,
)
from celery_hashbeat.store.postgres.connection import Database
from celery_hashbeat.store.postgres.lifetimes import mark_removal
from celery_hashbeat.store.postgres.schema import Tables


class PostgresControlRecords(ControlRecords):
    """The runtime controls of one prefix; PostgresStore hands its control calls here, with its
    lease check (``holds``, which locks the lease row within the transaction)."""

    def __init__(
        self, database: Database, tables: Tables, holds: Callable[[Any, str], bool]
    ) -> None:
        self._database = database
        self._t = tables
        self._holds = holds

    def _version_of(self, cur: Any) -> int:
        cur.execute(f"SELECT value FROM {self._t.meta} WHERE name = 'version'")
        row = cur.fetchone()
        return 0 if row is None else int(row[0])

    def _raise_version(self, cur: Any) -> int:
        cur.execute(
            f"UPDATE {self._t.meta} SET value = value + 1 WHERE name = 'version' RETURNING value"
        )
        return int(cur.fetchone()[0])

    def _queue(self, cur: Any) -> None:
        """Wait for the writers before: the version row is their queue, so what is read next
        is current until this transaction ends."""
        cur.execute(f"SELECT value FROM {self._t.meta} WHERE name = 'version' FOR UPDATE")

    def _records_of(self, cur: Any, name: str) -> tuple[str | None, str | None]:
        cur.execute(f"SELECT definition, pause FROM {self._t.controls} WHERE name = %s", (name,))
        row = cur.fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def controls_of(self, name: str) -> tuple[str | None, str | None]:
        with self._database.transaction() as cur:
            return self._records_of(cur, name)

    def edit(
        self, name: str, values: Mapping[str, str | None], require: bool | None = None
    ) -> int | None:
        check_values(values)
        with self._database.transaction() as cur:
            self._queue(cur)
            definition, pause = self._records_of(cur, name)
            if require is not None and require != (definition is not None):
                return None
            version = self._raise_version(cur)
            cur.execute(
                f"INSERT INTO {self._t.controls} (name, definition, pause, version)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (name) DO UPDATE SET"
                " definition = excluded.definition, pause = excluded.pause,"
                " version = excluded.version",
                (name, values.get(DEFINITION, definition), values.get(PAUSE, pause), version),
            )
            mark_removal(cur, self._t, name)
            return version

    def swap_definition(self, name: str, expected: str, definition: str) -> int | None:
        with self._database.transaction() as cur:
            self._queue(cur)
            if self._records_of(cur, name)[0] != expected:
                return None
            version = self._raise_version(cur)
            cur.execute(
                f"UPDATE {self._t.controls} SET definition = %s, version = %s WHERE name = %s",
                (definition, version, name),
            )
            return version

    def changes(self, since: int) -> Changes:
        with self._database.transaction() as cur:
            cur.execute(
                f"SELECT (SELECT value FROM {self._t.meta} WHERE name = 'version'),"
                f" (SELECT value FROM {self._t.meta} WHERE name = 'floor'),"
                f" (SELECT count(*) FROM {self._t.triggers}),"
                f" (SELECT count(*) FROM {self._t.handed})"
            )
            stored, floor, waiting, handed = cur.fetchone()
            version = 0 if stored is None else int(stored)
            if since == version:
                return Changes(version, {}, False, int(waiting), int(handed))
            full = since == 0 or since > version or since < int(floor or 0)
            cur.execute(
                f"SELECT name, definition, pause FROM {self._t.controls} WHERE version > %s",
                (-1 if full else since,),
            )
            records = {name: (definition, pause) for name, definition, pause in cur.fetchall()}
        return Changes(version, records, full, int(waiting), int(handed))

    def ask(self, trigger: str) -> int:
        with self._database.transaction() as cur:
            cur.execute(f"INSERT INTO {self._t.triggers} (record) VALUES (%s)", (trigger,))
            return self._raise_version(cur)

    def _waiting(self, cur: Any) -> list[tuple[str, str]]:
        """(record, who took it) of every trigger: those taken first, then the queue, each in
        id order."""
        cur.execute(f"SELECT record, taken_by FROM {self._t.triggers} ORDER BY taken_by = '', id")
        return [(record, taker) for record, taker in cur.fetchall()]

    def triggers(self) -> list[str]:
        with self._database.transaction() as cur:
            return [record for record, _ in self._waiting(cur)]

    def take_triggers(self, token: str) -> Taken:
        with self._database.transaction() as cur:
            if not self._holds(cur, token):
                return Taken()
            waiting = self._waiting(cur)
            cur.execute(f"UPDATE {self._t.triggers} SET taken_by = %s", (token,))
        recovered = sum(1 for _, taker in waiting if taker)
        return Taken([record for record, _ in waiting], recovered)

    def give_back_triggers(self, token: str, triggers: Sequence[str]) -> bool:
        with self._database.transaction() as cur:
            if not self._holds(cur, token):
                return False
            cur.execute(f"DELETE FROM {self._t.triggers} WHERE taken_by = %s", (token,))
            if not triggers:
                return True
            cur.execute(f"SELECT min(id) FROM {self._t.triggers}")
            lowest = cur.fetchone()[0]
            first = (1 if lowest is None else int(lowest)) - len(triggers)
            cur.executemany(
                f"INSERT INTO {self._t.triggers} (id, record) VALUES (%s, %s)",
                [(first + i, record) for i, record in enumerate(triggers)],
            )
            self._raise_version(cur)
            return True
