"""Entries' histories in PostgreSQL (docs/design.md §14): appended in the caller's transaction,
trimmed to the newest HISTORY_CAP, their lives kept by lifetimes.py."""

from __future__ import annotations

from typing import Any

from celery_hashbeat.store.base import HISTORY_CAP, History
from celery_hashbeat.store.postgres.lifetimes import lapsed, purge_histories, refresh_histories
from celery_hashbeat.store.postgres.schema import Tables


def append(cur: Any, t: Tables, history: History) -> None:
    """Append to the histories and trim each one written to its newest HISTORY_CAP."""
    if not history:
        return
    h = t.history
    entries = [entry for entry, _ in history]
    purge_histories(cur, t)  # a lapsed history is not written onto
    cur.execute(
        f"INSERT INTO {h} (entry, record) SELECT e, r FROM unnest(%b::text[], %b::text[])"
        " WITH ORDINALITY AS given (e, r, n) ORDER BY n",
        (entries, [record for _, record in history]),
    )
    cur.execute(
        f"DELETE FROM {h} USING (SELECT e, (SELECT id FROM {h} WHERE entry = e ORDER BY id"
        f" DESC OFFSET %s LIMIT 1) AS cut FROM unnest(%b::text[]) AS given (e)) AS trim"
        f" WHERE {h}.entry = trim.e AND {h}.id <= trim.cut",
        (HISTORY_CAP, sorted(set(entries))),
    )
    refresh_histories(cur, t, entries)


def newest(cur: Any, t: Tables, entry: str, limit: int) -> list[str]:
    """The newest ``limit`` records of ``entry``'s history (none once it lapsed), newest first."""
    cur.execute(
        f"SELECT record FROM {t.history} WHERE entry = %s AND NOT {lapsed(t)}"
        " ORDER BY id DESC LIMIT %s",
        (entry, entry, limit),
    )
    return [row[0] for row in cur.fetchall()]
