"""The record of sent slots (store/sent.py) in PostgreSQL: ``<prefix>_sent`` and the
``sent_since`` row of ``<prefix>_meta`` (server ms), as the SQLite store keeps them
(store/sqlite/sent.py), except that recording a slot is what checks it: ``record`` inserts and
says which rows were new, one statement for the claim path's one round trip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from celery_hashbeat.store.options import check_token
from celery_hashbeat.store.postgres.clock import NOW_MS, STATEMENT_MS
from celery_hashbeat.store.postgres.connection import Database
from celery_hashbeat.store.postgres.schema import Tables
from celery_hashbeat.store.sent import (
    SENT_KEEP_MS,
    Recorded,
    SentRecords,
    SlotClaim,
    horizon,
    plan_slots,
)

Pair = tuple[str, int]

#: Expired records a claim trims besides twice those it makes (``record``).
TRIM_AT_LEAST = 1_000


def _columns(pairs: Iterable[Pair]) -> tuple[list[str], list[int]]:
    listed = list(pairs)
    return [entry for entry, _ in listed], [int(slot) for _, slot in listed]


def record(cur: Any, t: Tables, pairs: Iterable[Pair], claimer: str = "") -> set[Pair]:
    """Record (entry, slot) ``pairs`` as sent where nobody did (a backfill's claim names its
    ``claimer``), trimming what is older than SENT_KEEP_MS; returns the pairs it recorded (the
    rest were recorded already). Inserting is the check, one primary-key probe each; the first
    recording marks when recording began."""
    entries, slots = _columns(pairs)
    if not entries:
        return set()
    # One statement, one round trip on the hot path. The trim takes the oldest expired rows by
    # the key, at most twice the rows recorded plus TRIM_AT_LEAST: slots expire as fast as they
    # are recorded, so it keeps up, and a record that grew while no beat claimed shrinks over
    # the next claims. Trimming every expired row at once failed each claim at the statement
    # timeout once 5 million had expired (50 minutes of 100,000 per-minute entries).
    cur.execute(
        f"WITH since AS (INSERT INTO {t.meta} (name, value) VALUES ('sent_since', {NOW_MS})"
        f" ON CONFLICT DO NOTHING), trimmed AS (DELETE FROM {t.sent} WHERE ctid = ANY(ARRAY("
        f"SELECT ctid FROM {t.sent} WHERE slot < {STATEMENT_MS} - %s ORDER BY slot LIMIT %s)))"
        f" INSERT INTO {t.sent} (entry, slot, claimer)"
        " SELECT w.entry, w.slot, %s FROM unnest(%b::text[], %b::bigint[]) AS w (entry, slot)"
        " ON CONFLICT DO NOTHING RETURNING entry, slot",
        (SENT_KEEP_MS, 2 * len(entries) + TRIM_AT_LEAST, claimer, entries, slots),
    )
    return {(entry, int(slot)) for entry, slot in cur.fetchall()}


def drop(cur: Any, t: Tables, pairs: Iterable[Pair]) -> set[Pair]:
    """Drop the records of (entry, slot) ``pairs`` (given back); returns those it dropped."""
    entries, slots = _columns(pairs)
    if not entries:
        return set()
    cur.execute(
        f"DELETE FROM {t.sent} s USING unnest(%b::text[], %b::bigint[]) AS w (entry, slot)"
        " WHERE s.entry = w.entry AND s.slot = w.slot RETURNING s.entry, s.slot",
        (entries, slots),
    )
    return {(entry, int(slot)) for entry, slot in cur.fetchall()}


def _horizon(cur: Any, t: Tables) -> int:
    cur.execute(f"SELECT (SELECT value FROM {t.meta} WHERE name = 'sent_since'), {NOW_MS}")
    since, now = cur.fetchone()
    return horizon(None if since is None else int(since), int(now))


class PostgresSentRecords(SentRecords):
    """The sent slots of one prefix in PostgreSQL; backfills' calls come here, with the store's
    lease check (``holds``, which locks the lease row within the transaction)."""

    def __init__(
        self, database: Database, tables: Tables, holds: Callable[[Any, str], bool]
    ) -> None:
        self._database = database
        self._t = tables
        self._holds = holds

    def recorded(self, entry: str, slots: Sequence[int]) -> Recorded:
        with self._database.transaction() as cur:
            start = _horizon(cur, self._t)
            cur.execute(
                f"SELECT slot FROM {self._t.sent} WHERE entry = %s AND slot = ANY(%b)",
                (entry, [int(slot) for slot in slots]),
            )
            sent = frozenset(int(slot) for (slot,) in cur.fetchall())
        return Recorded(start, sent)

    def claim_slots(
        self, token: str, entry: str, slots: Sequence[int], *, claimer: str
    ) -> SlotClaim | None:
        check_token(token)
        with self._database.transaction() as cur:
            if not self._holds(cur, token):
                return None
            start = _horizon(cur, self._t)
            wanted = plan_slots(slots, set(), start).claimed
            pairs = ((entry, slot) for slot in wanted)
            new = {slot for _, slot in record(cur, self._t, pairs, claimer)}
            old = [slot for slot in wanted if slot not in new]
            mine: set[int] = set()
            if old:
                cur.execute(
                    f"SELECT slot FROM {self._t.sent}"
                    " WHERE entry = %s AND slot = ANY(%b) AND claimer = %s",
                    (entry, old, claimer),
                )
                mine = {int(slot) for (slot,) in cur.fetchall()}
        return plan_slots(wanted, set(old), start, mine)

    def unclaim_slots(
        self, token: str, entry: str, slots: Sequence[int], *, claimer: str
    ) -> set[int]:
        with self._database.transaction() as cur:
            if not self._holds(cur, token):
                return set()
            return {slot for _, slot in drop(cur, self._t, ((entry, s) for s in slots))}
