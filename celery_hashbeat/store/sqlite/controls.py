"""The runtime controls (store/controls.py) in SQLite, each change one write transaction.

Their tables are in store/sqlite/schema.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence

from celery_hashbeat.store.controls import (
    DEFINITION,
    PAUSE,
    Changes,
    ControlRecords,
    Taken,
    check_values,
)
from celery_hashbeat.store.sqlite.database import Database
from celery_hashbeat.store.sqlite.lifetimes import floor_of, mark_removal


class SQLiteControlRecords(ControlRecords):
    """The runtime controls of one prefix in SQLite; SQLiteStore hands its control calls here,
    with its lease check (``holds``, within a transaction)."""

    def __init__(
        self, database: Database, prefix: str, holds: Callable[[sqlite3.Connection, str], bool]
    ) -> None:
        self._database = database
        self._prefix = prefix
        self._holds = holds

    def _version_of(self, db: sqlite3.Connection) -> int:
        row = db.execute(
            "SELECT version FROM hashbeat_control_version WHERE prefix = ?", (self._prefix,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def _raise_version(self, db: sqlite3.Connection) -> int:
        version = self._version_of(db) + 1
        db.execute(
            "INSERT INTO hashbeat_control_version (prefix, version) VALUES (?, ?)"
            " ON CONFLICT (prefix) DO UPDATE SET version = excluded.version",
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
        with self._database.transaction(write=False) as db:
            return self._records_of(db, name)

    def edit(
        self, name: str, values: Mapping[str, str | None], require: bool | None = None
    ) -> int | None:
        check_values(values)
        with self._database.transaction() as db:
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
            mark_removal(db, self._prefix, name)
            return version

    def swap_definition(self, name: str, expected: str, definition: str) -> int | None:
        with self._database.transaction() as db:
            if self._records_of(db, name)[0] != expected:
                return None
            version = self._raise_version(db)
            db.execute(
                "UPDATE hashbeat_controls SET definition = ?, version = ? WHERE prefix = ?"
                " AND name = ?",
                (definition, version, self._prefix, name),
            )
            return version

    def changes(self, since: int) -> Changes:
        with self._database.transaction(write=False) as db:
            version = self._version_of(db)
            waiting = db.execute(
                "SELECT COUNT(*) FROM hashbeat_triggers WHERE prefix = ?", (self._prefix,)
            ).fetchone()[0]
            handed = db.execute(
                "SELECT COUNT(*) FROM hashbeat_handed WHERE prefix = ?", (self._prefix,)
            ).fetchone()[0]
            if since == version:
                return Changes(version, {}, False, waiting, handed)
            full = since == 0 or since > version or since < floor_of(db, self._prefix)
            rows = db.execute(
                "SELECT name, definition, pause FROM hashbeat_controls WHERE prefix = ?"
                " AND version > ?",
                (self._prefix, -1 if full else since),
            )
            records = {name: (definition, pause) for name, definition, pause in rows}
        return Changes(version, records, full, waiting, handed)

    def ask(self, trigger: str) -> int:
        with self._database.transaction() as db:
            db.execute(
                "INSERT INTO hashbeat_triggers (prefix, record) VALUES (?, ?)",
                (self._prefix, trigger),
            )
            return self._raise_version(db)

    def _waiting(self, db: sqlite3.Connection) -> list[tuple[str, str]]:
        """(record, who took it) of every trigger of the prefix: those taken first, then the
        queue, each in id order."""
        return list(
            db.execute(
                "SELECT record, taken_by FROM hashbeat_triggers WHERE prefix = ?"
                " ORDER BY taken_by = '', id",
                (self._prefix,),
            )
        )

    def triggers(self) -> list[str]:
        with self._database.transaction(write=False) as db:
            return [record for record, _ in self._waiting(db)]

    def take_triggers(self, token: str) -> Taken:
        with self._database.transaction() as db:
            if not self._holds(db, token):
                return Taken()
            waiting = self._waiting(db)
            db.execute(
                "UPDATE hashbeat_triggers SET taken_by = ? WHERE prefix = ?", (token, self._prefix)
            )
        recovered = sum(1 for _, taker in waiting if taker)
        return Taken([record for record, _ in waiting], recovered)

    def give_back_triggers(self, token: str, triggers: Sequence[str]) -> bool:
        with self._database.transaction() as db:
            if not self._holds(db, token):
                return False
            db.execute(
                "DELETE FROM hashbeat_triggers WHERE prefix = ? AND taken_by = ?",
                (self._prefix, token),
            )
            if not triggers:
                return True
            (lowest,) = db.execute("SELECT MIN(id) FROM hashbeat_triggers").fetchone()
            first = (1 if lowest is None else int(lowest)) - len(triggers)
            db.executemany(
                "INSERT INTO hashbeat_triggers (id, prefix, record) VALUES (?, ?, ?)",
                ((first + i, self._prefix, record) for i, record in enumerate(triggers)),
            )
            self._raise_version(db)
            return True
