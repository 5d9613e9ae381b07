"""The record of sent slots (store/sent.py) in SQLite: a row per (entry, slot) claimed, in
``hashbeat_sent`` with the backfill claim that recorded it (``claimer``; '' for the regular
claims), and when recording began, in ``hashbeat_sent_since``.

The store's claims and give-backs write it inside their own transactions (``check``,
``record``, ``drop``); backfills read and claim it through SQLiteSentRecords. It is trimmed by
age (SENT_KEEP_MS) at each claim, one indexed delete; there is no count cap: rows cost disk, not
memory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence

from celery_hashbeat.store.options import check_token
from celery_hashbeat.store.sent import (
    SENT_KEEP_MS,
    Recorded,
    SentRecords,
    SlotClaim,
    horizon,
    plan_slots,
)
from celery_hashbeat.store.sqlite.clock import wall_now_ms
from celery_hashbeat.store.sqlite.database import Database

#: (entry, slot) pairs per query: two variables each, under SQLite's limit.
PAIRS = 200

Pair = tuple[str, int]

#: The store's lease check, within a transaction.
Holds = Callable[[sqlite3.Connection, str], bool]


def _pairs(pairs: list[Pair]) -> Iterator[tuple[list[object], str]]:
    for start in range(0, len(pairs), PAIRS):
        chunk = pairs[start : start + PAIRS]
        yield [value for pair in chunk for value in pair], ", ".join(["(?, ?)"] * len(chunk))


def check(db: sqlite3.Connection, prefix: str, pairs: Iterable[Pair]) -> dict[Pair, str]:
    """Which (entry, slot) ``pairs`` are recorded as sent, each with its claimer."""
    found: dict[Pair, str] = {}
    for values, marks in _pairs(list(pairs)):
        # CROSS JOIN keeps the given pairs outermost: one index probe each, not a scan.
        rows = db.execute(
            f"SELECT s.entry, s.slot, s.claimer FROM (VALUES {marks}) AS w"
            " CROSS JOIN hashbeat_sent s ON s.prefix = ? AND s.entry = w.column1"
            " AND s.slot = w.column2",
            (*values, prefix),
        )
        found.update(((entry, int(slot)), claimer) for entry, slot, claimer in rows)
    return found


def record(db: sqlite3.Connection, prefix: str, pairs: Iterable[Pair], claimer: str = "") -> None:
    """Record (entry, slot) ``pairs`` as sent (a claim's: a backfill's names its ``claimer``),
    trimming what is older than SENT_KEEP_MS; the first recording marks when recording began."""
    now = wall_now_ms()
    db.execute(
        "INSERT OR IGNORE INTO hashbeat_sent_since (prefix, since_ms) VALUES (?, ?)", (prefix, now)
    )
    db.execute(
        "DELETE FROM hashbeat_sent WHERE prefix = ? AND slot < ?", (prefix, now - SENT_KEEP_MS)
    )
    db.executemany(
        "INSERT OR IGNORE INTO hashbeat_sent (prefix, entry, slot, claimer) VALUES (?, ?, ?, ?)",
        ((prefix, entry, int(slot), claimer) for entry, slot in pairs),
    )


def drop(db: sqlite3.Connection, prefix: str, pairs: Iterable[Pair]) -> set[Pair]:
    """Drop the records of (entry, slot) ``pairs`` (given back); returns those it dropped."""
    dropped = set()
    for entry, slot in pairs:
        deleted = db.execute(
            "DELETE FROM hashbeat_sent WHERE prefix = ? AND entry = ? AND slot = ?",
            (prefix, entry, int(slot)),
        )
        if deleted.rowcount:
            dropped.add((entry, int(slot)))
    return dropped


def _horizon(db: sqlite3.Connection, prefix: str) -> int:
    row = db.execute(
        "SELECT since_ms FROM hashbeat_sent_since WHERE prefix = ?", (prefix,)
    ).fetchone()
    return horizon(None if row is None else int(row[0]), wall_now_ms())


class SQLiteSentRecords(SentRecords):
    """The sent slots of one prefix in a SQLite file; backfills' calls come here."""

    def __init__(self, database: Database, prefix: str, holds: Holds) -> None:
        self._database = database
        self._prefix = prefix
        self._holds = holds

    def recorded(self, entry: str, slots: Sequence[int]) -> Recorded:
        with self._database.transaction(write=False) as db:
            start = _horizon(db, self._prefix)
            sent = check(db, self._prefix, ((entry, int(slot)) for slot in slots))
        return Recorded(start, frozenset(slot for _, slot in sent))

    def claim_slots(
        self, token: str, entry: str, slots: Sequence[int], *, claimer: str
    ) -> SlotClaim | None:
        check_token(token)
        with self._database.transaction() as db:
            if not self._holds(db, token):
                return None
            start = _horizon(db, self._prefix)
            found = check(db, self._prefix, ((entry, int(slot)) for slot in slots))
            mine = {slot for (_, slot), by in found.items() if by == claimer}
            plan = plan_slots(slots, {slot for _, slot in found}, start, mine)
            if plan.claimed:
                record(db, self._prefix, ((entry, slot) for slot in plan.claimed), claimer)
        return plan

    def unclaim_slots(
        self, token: str, entry: str, slots: Sequence[int], *, claimer: str
    ) -> set[int]:
        with self._database.transaction() as db:
            if not self._holds(db, token):
                return set()
            return {slot for _, slot in drop(db, self._prefix, ((entry, s) for s in slots))}
