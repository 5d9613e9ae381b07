"""The bounded life of records of things that are gone (store/retention.py), in PostgreSQL.

As in SQLite (which has no key expiry either): each history has a row in ``<prefix>_history_life``
saying until when it lives, on the server's clock, refreshed by every record and cut short when
its entry is forgotten; a history past it is not read, and is purged by the next record,
heartbeat or forget. A removed name's row in the runtime controls carries when it was removed; the
first change GONE_TTL_MS or more later deletes it and raises the prefix's *floor* (the ``floor``
row of the meta table), so a reader from before the floor reads every name. Every function runs
inside the caller's transaction; the lifetimes are read from ``retention`` at each call. A
search by age compares with ``statement_timestamp()``, which the planner can take to an index
(``clock_timestamp()`` changes while a statement runs, so it cannot).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from celery_hashbeat.store import retention
from celery_hashbeat.store.postgres.clock import LATER
from celery_hashbeat.store.postgres.schema import Tables


def lapsed(t: Tables) -> str:
    """A condition true when the history of the entry given as %s has lapsed."""
    return (
        f"EXISTS (SELECT 1 FROM {t.history_life} AS life WHERE life.entry = %s"
        " AND life.expires_at <= clock_timestamp())"
    )


def refresh_histories(cur: Any, t: Tables, appended: Mapping[str, int]) -> dict[str, int]:
    """The histories just written (with how many records each gained) live HISTORY_TTL_MS from
    now, except those of forgotten entries (GONE_TTL_MS or less left): a late record does not
    revive them. Returns each one's records since it was last trimmed."""
    entries = sorted(appended)
    cur.execute(
        f"INSERT INTO {t.history_life} AS life (entry, expires_at, untrimmed) SELECT e, {LATER},"
        " n FROM unnest(%b::text[], %b::integer[]) AS given (e, n) ON CONFLICT (entry) DO UPDATE"
        f" SET expires_at = CASE WHEN life.expires_at > {LATER} THEN excluded.expires_at ELSE"
        " life.expires_at END, untrimmed = life.untrimmed + excluded.untrimmed"
        " RETURNING entry, untrimmed",
        (
            retention.HISTORY_TTL_MS,
            entries,
            [appended[entry] for entry in entries],
            retention.GONE_TTL_MS,
        ),
    )
    return {entry: int(untrimmed) for entry, untrimmed in cur.fetchall()}


def retire_histories(cur: Any, t: Tables, entries: list[str]) -> None:
    """The histories of forgotten entries live at most GONE_TTL_MS more; then purge."""
    cur.execute(
        f"UPDATE {t.history_life} SET expires_at = least(expires_at, {LATER})"
        " WHERE entry = ANY(%b)",
        (retention.GONE_TTL_MS, entries),
    )
    purge_histories(cur, t)


def purge_histories(cur: Any, t: Tables) -> None:
    """Delete the histories whose life ended (found by the index on their end; the histories
    themselves by entry, only when there are some)."""
    cur.execute(
        f"DELETE FROM {t.history_life} WHERE expires_at <= statement_timestamp() RETURNING entry"
    )
    gone = [entry for (entry,) in cur.fetchall()]
    if gone:
        cur.execute(f"DELETE FROM {t.history} WHERE entry = ANY(%b)", (gone,))


def mark_removal(cur: Any, t: Tables, name: str) -> None:
    """After an edit of ``name``: note when its last record went (or that it has one again),
    then drop the marks of names removed GONE_TTL_MS or more ago, raising the floor past them."""
    cur.execute(
        f"UPDATE {t.controls} SET removed_at = CASE WHEN definition IS NULL AND pause IS NULL"
        " THEN clock_timestamp() END WHERE name = %s",
        (name,),
    )
    cur.execute(
        f"WITH dropped AS (DELETE FROM {t.controls} WHERE removed_at <= statement_timestamp() - %s"
        f" * interval '1 millisecond' RETURNING version) UPDATE {t.meta} SET value ="
        " greatest(value, (SELECT max(version) FROM dropped)) WHERE name = 'floor'"
        " AND EXISTS (SELECT 1 FROM dropped)",
        (retention.GONE_TTL_MS,),
    )
