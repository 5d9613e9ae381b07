"""Every table of the SQLite store, spelled in this one place, and the step that makes them.

Files of every release open: ``prepare`` creates what is missing and adds in place the columns
that later releases added. Existing data is read under these names: they never change.
"""

from __future__ import annotations

import sqlite3

# expires_ms is on the monotonic clock of the boot named by boot (store/sqlite/clock.py).
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
    # The runtime controls (store/controls.py): a row per name with its definition, its pause
    # record and the version of its last change (rows stay after their records go, so that a
    # beat still learns of the removal); the version; the triggers waiting, in id order, each
    # with the token of the leader that took it and has not settled it ('' while queued).
    "CREATE TABLE IF NOT EXISTS hashbeat_controls (prefix TEXT NOT NULL, name TEXT NOT NULL,"
    " definition TEXT, pause TEXT, version INTEGER NOT NULL, PRIMARY KEY (prefix, name))"
    " WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS hashbeat_controls_version ON hashbeat_controls (prefix, version)",
    "CREATE TABLE IF NOT EXISTS hashbeat_control_version (prefix TEXT PRIMARY KEY,"
    " version INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS hashbeat_triggers (id INTEGER PRIMARY KEY, prefix TEXT NOT NULL,"
    " record TEXT NOT NULL, taken_by TEXT NOT NULL DEFAULT '')",
    # Slots handed over (docs/design.md §5): claims of one beat that a later claim by another
    # moved past, with when (wall-clock ms, kept HANDOVER_KEEP_MS); and the slots their
    # claimers surely did not send, for the leader to take.
    "CREATE TABLE IF NOT EXISTS hashbeat_claimed (prefix TEXT NOT NULL, entry TEXT NOT NULL,"
    " slot INTEGER NOT NULL, token TEXT NOT NULL, recorded_ms INTEGER NOT NULL,"
    " PRIMARY KEY (prefix, entry, slot, token)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS hashbeat_claimed_age ON hashbeat_claimed (prefix, recorded_ms)",
    "CREATE TABLE IF NOT EXISTS hashbeat_handed (prefix TEXT NOT NULL, entry TEXT NOT NULL,"
    " slot INTEGER NOT NULL, PRIMARY KEY (prefix, entry, slot)) WITHOUT ROWID",
    # Until when each entry's history lives (wall-clock ms, store/sqlite/lifetimes.py).
    "CREATE TABLE IF NOT EXISTS hashbeat_history_life (prefix TEXT NOT NULL, entry TEXT NOT"
    " NULL, expires_ms INTEGER NOT NULL, PRIMARY KEY (prefix, entry)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS hashbeat_history_life_expires ON hashbeat_history_life (prefix,"
    " expires_ms)",
    # The operators' records (store/operations.py): the audit trail in arrival (id) order, with
    # when it was taken (wall-clock ms); the definitions each schedule digest runs.
    "CREATE TABLE IF NOT EXISTS hashbeat_audit (id INTEGER PRIMARY KEY, prefix TEXT NOT NULL,"
    " at_ms INTEGER NOT NULL, record TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS hashbeat_audit_prefix ON hashbeat_audit (prefix, id)",
    "CREATE TABLE IF NOT EXISTS hashbeat_schedules (prefix TEXT NOT NULL, digest TEXT NOT NULL,"
    " at_ms INTEGER NOT NULL, definitions TEXT NOT NULL, PRIMARY KEY (prefix, digest))"
    " WITHOUT ROWID",
    # The record of sent slots (store/sent.py): each (entry, slot) claimed, keyed slot first so
    # that a tick's new slots land together at the end and the trim by age is a range; and when
    # recording began (wall-clock ms).
    "CREATE TABLE IF NOT EXISTS hashbeat_sent (prefix TEXT NOT NULL, slot INTEGER NOT NULL,"
    " entry TEXT NOT NULL, PRIMARY KEY (prefix, slot, entry)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS hashbeat_sent_since (prefix TEXT PRIMARY KEY, since_ms INTEGER"
    " NOT NULL) WITHOUT ROWID",
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
    # When a name's records all went, and the floor of the changes (store/sqlite/lifetimes.py).
    "hashbeat_controls": ("removed_ms INTEGER",),
    "hashbeat_control_version": ("floor INTEGER NOT NULL DEFAULT 0",),
    # Which backfill claim recorded a sent slot ('' for the regular claims: store/sqlite/sent.py).
    "hashbeat_sent": ("claimer TEXT NOT NULL DEFAULT ''",),
    # Who took a trigger and has not settled it ('' while it waits: store/sqlite/controls.py).
    "hashbeat_triggers": ("taken_by TEXT NOT NULL DEFAULT ''",),
}

SCHEMA_VERSION = 10


def prepare(db: sqlite3.Connection) -> None:
    """WAL mode and the schema; idempotent, so every process may race to do it."""
    db.execute("PRAGMA journal_mode=WAL")
    # A claim must survive a power cut, or the slot it fenced could be enqueued again.
    db.execute("PRAGMA synchronous=FULL")
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in SCHEMA:
            db.execute(statement)
        for table, columns in ADDED_COLUMNS.items():
            present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            for column in columns:
                if column.split()[0] not in present:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
                    if table == "hashbeat_lease":
                        db.execute("DELETE FROM hashbeat_lease")
        # Always a real write, so that a read-only file is found out now, not at first claim.
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
