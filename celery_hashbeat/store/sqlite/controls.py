"""The runtime controls (store/controls.py) in SQLite, each change one write transaction.

Tables: ``hashbeat_controls`` (a row per name: its definition, its pause record and the version
of its last change; rows stay after their records go, so that a beat still learns of the
removal), ``hashbeat_control_version`` (the version) and ``hashbeat_triggers`` (the queue,
ordered by id).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager

from celery_hashbeat.store.controls import DEFINITION, PAUSE, Changes, ControlRecords, check_values

CONTROL_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS hashbeat_controls (prefix TEXT NOT NULL, name TEXT NOT NULL,"
    " definition TEXT, pause TEXT, version INTEGER NOT NULL, PRIMARY KEY (prefix, name))"
    " WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS hashbeat_controls_version ON hashbeat_controls (prefix, version)",
    "CREATE TABLE IF NOT EXISTS hashbeat_control_version (prefix TEXT PRIMARY KEY,"
    " version INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS hashbeat_triggers (id INTEGER PRIMARY KEY, prefix TEXT NOT NULL,"
    " record TEXT NOT NULL)",
)


class SQLiteControlRecords(ControlRecords):
    """The runtime controls of one prefix in SQLite; SQLiteStore hands its control calls here,
    with its transactions (``tx``) and its lease check (``holds``)."""

    def __init__(
        self,
        prefix: str,
        tx: Callable[..., AbstractContextManager[sqlite3.Connection]],
        holds: Callable[[sqlite3.Connection, str], bool],
    ) -> None:
        self._prefix = prefix
        self._tx = tx
        self._holds = holds

    def _version_of(self, db: sqlite3.Connection) -> int:
        row = db.execute(
            "SELECT version FROM hashbeat_control_version WHERE prefix = ?", (self._prefix,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def _raise_version(self, db: sqlite3.Connection) -> int:
        version = self._version_of(db) + 1
        db.execute(
            "INSERT OR REPLACE INTO hashbeat_control_version (prefix, version) VALUES (?, ?)",
            (self._prefix, version),
        )
        return version

    def _records_of(self, db: sqlite3.Connection, name: str) -> tuple[str | None, str | None]:
        row = db.execute(
            "SELECT definition, pause FROM hashbeat_controls WHERE prefix = ? AND name = ?",
            (self._prefix, name),
        ).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def controls_of(self, name: str) -> tuple[str | None, str | None]:
        with self._tx(write=False) as db:
            return self._records_of(db, name)

    def edit(
        self, name: str, values: Mapping[str, str | None], require: bool | None = None
    ) -> int | None:
        check_values(values)
        with self._tx() as db:
            definition, pause = self._records_of(db, name)
            if require is not None and require != (definition is not None):
                return None
            version = self._raise_version(db)
            db.execute(
                "INSERT OR REPLACE INTO hashbeat_controls (prefix, name, definition, pause,"
                " version) VALUES (?, ?, ?, ?, ?)",
                (
                    self._prefix,
                    name,
                    values.get(DEFINITION, definition),
                    values.get(PAUSE, pause),
                    version,
                ),
            )
            return version

    def changes(self, since: int) -> Changes:
        with self._tx(write=False) as db:
            version = self._version_of(db)
            waiting = db.execute(
                "SELECT COUNT(*) FROM hashbeat_triggers WHERE prefix = ?", (self._prefix,)
            ).fetchone()[0]
            if since == version:
                return Changes(version, {}, False, waiting)
            full = since == 0 or since > version
            rows = db.execute(
                "SELECT name, definition, pause FROM hashbeat_controls WHERE prefix = ?"
                " AND version > ?",
                (self._prefix, -1 if full else since),
            )
            records = {name: (definition, pause) for name, definition, pause in rows}
        return Changes(version, records, full, waiting)

    def ask(self, trigger: str) -> int:
        with self._tx() as db:
            db.execute(
                "INSERT INTO hashbeat_triggers (prefix, record) VALUES (?, ?)",
                (self._prefix, trigger),
            )
            return self._raise_version(db)

    def _waiting(self, db: sqlite3.Connection) -> list[tuple[int, str]]:
        return list(
            db.execute(
                "SELECT id, record FROM hashbeat_triggers WHERE prefix = ? ORDER BY id",
                (self._prefix,),
            )
        )

    def triggers(self) -> list[str]:
        with self._tx(write=False) as db:
            return [record for _, record in self._waiting(db)]

    def take_triggers(self, token: str) -> list[str]:
        with self._tx() as db:
            if not self._holds(db, token):
                return []
            waiting = self._waiting(db)
            db.execute("DELETE FROM hashbeat_triggers WHERE prefix = ?", (self._prefix,))
        return [record for _, record in waiting]

    def give_back_triggers(self, token: str, triggers: Sequence[str]) -> bool:
        if not triggers:
            return True
        with self._tx() as db:
            if not self._holds(db, token):
                return False
            (lowest,) = db.execute("SELECT MIN(id) FROM hashbeat_triggers").fetchone()
            first = (1 if lowest is None else int(lowest)) - len(triggers)
            db.executemany(
                "INSERT INTO hashbeat_triggers (id, prefix, record) VALUES (?, ?, ?)",
                ((first + i, self._prefix, record) for i, record in enumerate(triggers)),
            )
            self._raise_version(db)
            return True
