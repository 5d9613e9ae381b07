"""The bounded life of records of things that are gone (store/retention.py), in SQLite.

SQLite has no key expiry, so each history has a row saying until when it lives (wall-clock ms:
days, not lease arithmetic), refreshed by every record and cut short when its entry is forgotten;
a history past it is not read and is purged by the next heartbeat or forget. A removed name's row
in the runtime controls carries when it was removed; the first change GONE_TTL_MS or more later
deletes it and raises the prefix's *floor*, so a reader from before the floor reads every name.
Every function runs inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from celery_hashbeat.store import retention
from celery_hashbeat.store.sqlite.clock import wall_now_ms

#: A history row of ``prefix`` and ``entry`` (two parameters, then the instant) that has lapsed.
LAPSED = (
    "EXISTS (SELECT 1 FROM hashbeat_history_life AS life WHERE life.prefix = ? AND"
    " life.entry = ? AND life.expires_ms <= ?)"
)


def refresh_histories(db: sqlite3.Connection, prefix: str, entries: Iterable[str]) -> None:
    """The histories just written live HISTORY_TTL_MS from now, except those of forgotten
    entries (GONE_TTL_MS or less left): a late record does not revive them."""
    now = wall_now_ms()
    db.executemany(
        "INSERT INTO hashbeat_history_life (prefix, entry, expires_ms) VALUES (?, ?, ?)"
        " ON CONFLICT (prefix, entry) DO UPDATE SET expires_ms = excluded.expires_ms"
        " WHERE hashbeat_history_life.expires_ms > ?",
        (
            (prefix, entry, now + retention.HISTORY_TTL_MS, now + retention.GONE_TTL_MS)
            for entry in set(entries)
        ),
    )


def retire_histories(db: sqlite3.Connection, prefix: str, entries: Iterable[str]) -> None:
    """The histories of forgotten entries live at most GONE_TTL_MS more; then purge."""
    now = wall_now_ms()
    db.executemany(
        "UPDATE hashbeat_history_life SET expires_ms = MIN(expires_ms, ?) WHERE prefix = ?"
        " AND entry = ?",
        ((now + retention.GONE_TTL_MS, prefix, entry) for entry in entries),
    )
    purge_histories(db, prefix, now)


def purge_histories(db: sqlite3.Connection, prefix: str, now_ms: int | None = None) -> None:
    """Delete the histories whose life ended."""
    now = wall_now_ms() if now_ms is None else now_ms
    lapsed = db.execute(
        "SELECT entry FROM hashbeat_history_life WHERE prefix = ? AND expires_ms <= ?",
        (prefix, now),
    ).fetchall()
    if not lapsed:
        return
    db.executemany(
        "DELETE FROM hashbeat_history WHERE prefix = ? AND entry = ?",
        ((prefix, entry) for (entry,) in lapsed),
    )
    db.execute(
        "DELETE FROM hashbeat_history_life WHERE prefix = ? AND expires_ms <= ?", (prefix, now)
    )


def mark_removal(db: sqlite3.Connection, prefix: str, name: str) -> None:
    """After an edit of ``name``: note when its last record went (or that it has one again),
    then drop the marks of names removed GONE_TTL_MS or more ago, raising the floor past them."""
    now = wall_now_ms()
    db.execute(
        "UPDATE hashbeat_controls SET removed_ms = CASE WHEN definition IS NULL AND pause IS NULL"
        " THEN ? END WHERE prefix = ? AND name = ?",
        (now, prefix, name),
    )
    cutoff = now - retention.GONE_TTL_MS
    (dropped,) = db.execute(
        "SELECT MAX(version) FROM hashbeat_controls WHERE prefix = ? AND removed_ms <= ?",
        (prefix, cutoff),
    ).fetchone()
    if dropped is None:
        return
    db.execute(
        "DELETE FROM hashbeat_controls WHERE prefix = ? AND removed_ms <= ?", (prefix, cutoff)
    )
    db.execute(
        "UPDATE hashbeat_control_version SET floor = MAX(floor, ?) WHERE prefix = ?",
        (int(dropped), prefix),
    )


def floor_of(db: sqlite3.Connection, prefix: str) -> int:
    """The newest version of a dropped mark: a reader from before it must read every name."""
    row = db.execute(
        "SELECT floor FROM hashbeat_control_version WHERE prefix = ?", (prefix,)
    ).fetchone()
    return 0 if row is None else int(row[0])
