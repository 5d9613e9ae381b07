"""Entries' histories in PostgreSQL (docs/design.md §14): appended in the caller's transaction,
kept to the newest HISTORY_CAP, their lives kept by lifetimes.py.

Trimming a history is an index walk past its newest HISTORY_CAP rows: done at every append, it
cost more than the append itself (a claim of ~830 slots spent 7.5 of its ~37 ms in the server
there, docs/design.md §14). So a history is trimmed once it has gained TRIM_EVERY records since
it was last trimmed (counted on its row in ``<prefix>_history_life``), and holds at most
HISTORY_CAP + TRIM_EVERY - 1 rows; a read never returns more than the newest HISTORY_CAP, as the
other stores keep.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from celery_hashbeat.store.base import HISTORY_CAP, History
from celery_hashbeat.store.postgres.lifetimes import lapsed, purge_histories, refresh_histories
from celery_hashbeat.store.postgres.schema import Tables

#: A history is trimmed back to HISTORY_CAP once it gained this many records since its last trim.
TRIM_EVERY = 20


def append(cur: Any, t: Tables, history: History) -> None:
    """Append to the histories; trim those that gained TRIM_EVERY records since their last trim."""
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
    untrimmed = refresh_histories(cur, t, Counter(entries))
    due = sorted(entry for entry, count in untrimmed.items() if count >= TRIM_EVERY)
    if not due:
        return
    cur.execute(
        f"WITH trimmed AS (DELETE FROM {h} USING (SELECT e, (SELECT id FROM {h} WHERE entry = e"
        f" ORDER BY id DESC OFFSET %s LIMIT 1) AS cut FROM unnest(%b::text[]) AS given (e)) AS"
        f" trim WHERE {h}.entry = trim.e AND {h}.id <= trim.cut) UPDATE {t.history_life}"
        " SET untrimmed = 0 WHERE entry = ANY(%b)",
        (HISTORY_CAP, due, due),
    )


def newest(cur: Any, t: Tables, entry: str, limit: int) -> list[str]:
    """The newest ``limit`` records of ``entry``'s history, HISTORY_CAP at most (none once it
    lapsed), newest first."""
    cur.execute(
        f"SELECT record FROM {t.history} WHERE entry = %s AND NOT {lapsed(t)}"
        " ORDER BY id DESC LIMIT %s",
        (entry, entry, min(limit, HISTORY_CAP)),
    )
    return [row[0] for row in cur.fetchall()]
