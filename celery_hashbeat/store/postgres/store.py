"""The PostgreSQL store: the protocol (store/base.py) in tables of one database.

Its parts, each in its own module of store/postgres/: the URL and the driver (connect.py), the
connection and its transactions (connection.py, watchdog.py), the tables (schema.py), run leases
(runs.py), the runtime controls (controls.py), histories and their lives (history.py,
lifetimes.py). This module speaks the protocol over them: the lease, fenced
claims, hand-overs, shared documents, history and heartbeats.

Each change that must not interleave with another (the lease, claims, give-backs, anchors,
hand-overs) is one transaction that first locks the prefix's one lease row (``FOR UPDATE``):
changes of one prefix queue there, as SQLite's write lock queues them, and the lease is checked
under that lock. Time comes from the database server (``clock_timestamp()``), never from the
beats, whose clocks may disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

from celery_hashbeat.store.base import HANDOVER_KEEP_MS, HISTORY_CAP, History, Store
from celery_hashbeat.store.fencing import (
    Row,
    fresh,
    plan_anchors,
    plan_claim,
    plan_give_back,
    plan_hand_over,
)
from celery_hashbeat.store.options import (
    check_digest,
    check_guard,
    check_prefix,
    check_token,
    check_ttl,
)
from celery_hashbeat.store.postgres import history as history_of
from celery_hashbeat.store.postgres import sent
from celery_hashbeat.store.postgres.clock import LATER, NOW_MS
from celery_hashbeat.store.postgres.connect import target
from celery_hashbeat.store.postgres.connection import Database
from celery_hashbeat.store.postgres.controls import PostgresControlRecords
from celery_hashbeat.store.postgres.lifetimes import purge_histories, retire_histories
from celery_hashbeat.store.postgres.operations import PostgresOperatorRecords
from celery_hashbeat.store.postgres.runs import RunLeases
from celery_hashbeat.store.postgres.schema import Tables
from celery_hashbeat.store.postgres.sent import PostgresSentRecords
from celery_hashbeat.store.values import BeatInfo, Claimed, Fence, LeaseInfo, RunGuard

T = TypeVar("T")

#: Rows per statement: a first take-over of 100,000 entries writes them in many short statements,
#: each well within the statement timeout, in its one transaction.
CHUNK = 5_000


def chunks(items: list[T]) -> Iterator[list[T]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


class PostgresStore(Store):
    """The coordination protocol in PostgreSQL.

    Options (keywords or ``hashbeat_store_options``; libpq's own go in the URL's query):
    ``timeout`` (alias ``socket_timeout``), the seconds a statement, a lock wait or an unanswering
    server may take before StoreUnavailable (default 3); ``socket_connect_timeout``, the same for
    connecting. ``min_replicas`` is refused (connect.py says why).
    """

    def __init__(self, url: str, prefix: str = "hashbeat", **options: object) -> None:
        self._tables = t = Tables(check_prefix(prefix))
        self._database = Database(target(url, options), t)
        self._runs = RunLeases(self._database, t)
        super().__init__(
            self._database.url,
            PostgresControlRecords(self._database, t, self._holds),
            PostgresOperatorRecords(self._database, t),
            PostgresSentRecords(self._database, t, self._holds),
        )

    # The lease row ---------------------------------------------------------------------------

    def _holder(self, cur: Any, lock: bool = True) -> tuple[str, int] | None:
        """The live lease's token and its time left (ms), or None; ``lock`` queues this
        transaction behind every other change of the prefix."""
        cur.execute(
            "SELECT token, ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint"
            f" FROM {self._tables.lease}" + (" FOR UPDATE" if lock else "")
        )
        row = cur.fetchone()
        if row is None or not row[0] or row[1] is None or row[1] <= 0:
            return None
        return str(row[0]), int(row[1])

    def _holds(self, cur: Any, token: str) -> bool:
        holder = self._holder(cur)
        return holder is not None and holder[0] == token

    def _set_lease(self, cur: Any, token: str, ttl_ms: int) -> None:
        cur.execute(
            f"UPDATE {self._tables.lease} SET token = %s, expires_at = {LATER}", (token, ttl_ms)
        )

    def acquire(self, token: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        check_token(token)
        with self._database.transaction() as cur:
            holder = self._holder(cur)
            if holder is not None:
                return holder[0] == token
            self._set_lease(cur, token, ttl_ms)
            return True

    def renew(self, token: str, ttl_ms: int, history: History = ()) -> bool:
        check_ttl(ttl_ms)
        with self._database.transaction() as cur:
            self._record(cur, history)
            if not self._holds(cur, token):
                return False
            self._set_lease(cur, token, ttl_ms)
            return True

    def release(self, token: str) -> bool:
        with self._database.transaction() as cur:
            if not self._holds(cur, token):
                return False
            cur.execute(f"UPDATE {self._tables.lease} SET token = '', expires_at = 'epoch'")
            cur.execute(f"DELETE FROM {self._tables.beats} WHERE token = %s", (token,))
            return True

    def leader(self) -> LeaseInfo | None:
        with self._database.transaction() as cur:
            holder = self._holder(cur, lock=False)
        return None if holder is None else LeaseInfo(*holder)

    # Fences ----------------------------------------------------------------------------------

    def _rows(self, cur: Any, entries: list[str] | None) -> dict[str, tuple[Fence, str]]:
        """The readable fences of ``entries`` (all when None) with their ``previous``, rows
        given back as the text the Redis store keeps, so one parser reads both."""
        columns = (
            f"SELECT entry, slot, token, previous, fingerprint, runs FROM {self._tables.fired}"
        )
        if entries is None:
            rows = cur.execute(columns).fetchall()
        else:
            rows = []
            for chunk in chunks(entries):
                rows += cur.execute(f"{columns} WHERE entry = ANY(%b)", (chunk,)).fetchall()
        counts = {row[0]: int(row[5]) for row in rows if row[5]}
        stored = ((row[0], "|".join(map(str, row[1:5]))) for row in rows)
        return self._parse_stored(stored, counts)

    def _stored(self, cur: Any, entries: list[str] | None) -> dict[str, Fence]:
        return {entry: fence for entry, (fence, _) in self._rows(cur, entries).items()}

    def _write(self, cur: Any, rows: list[Row]) -> None:
        """Write whole fence rows, a CHUNK of them per statement."""
        for chunk in chunks(rows):
            cur.execute(
                f"INSERT INTO {self._tables.fired} (entry, slot, token, previous, fingerprint,"
                " runs) SELECT * FROM unnest(%b::text[], %b::bigint[], %b::text[], %b::text[],"
                " %b::text[], %b::bigint[]) ON CONFLICT (entry) DO UPDATE SET slot = excluded.slot,"
                " token = excluded.token, previous = excluded.previous,"
                " fingerprint = excluded.fingerprint, runs = excluded.runs",
                [list(column) for column in zip(*chunk, strict=True)],
            )

    def claim(
        self,
        token: str,
        slots: Mapping[str, tuple[int, str]],
        runs: Mapping[str, RunGuard] | None = None,
        history: History = (),
    ) -> Claimed:
        check_token(token)
        runs = runs or {}
        for each in runs.values():
            check_guard(each)
        if not slots:
            self.record(history)
            return Claimed()
        with self._database.transaction() as cur:
            self._record(cur, history)
            if not self._holds(cur, token):
                return Claimed()
            stored = self._stored(cur, list(slots))
            guarded = [entry for entry in slots if entry in runs]
            holders = self._runs.holders(cur, guarded) if guarded else {}
            # Recording the slots is the check that nobody recorded them (store/sent.py).
            candidates = fresh(token, slots, stored)
            recorded = sent.record(cur, self._tables, candidates)
            plan = plan_claim(token, slots, runs, stored, holders, set(candidates) - recorded)
            for entry, guard in plan.grants:
                self._runs.grant(cur, entry, guard.task_id, guard.ttl_ms)
            self._write(cur, plan.rows)
            sent.drop(cur, self._tables, recorded - {(row[0], row[1]) for row in plan.rows})
            self._keep_claims(cur, plan.moved_past)
        return plan.claimed

    def _keep_claims(self, cur: Any, claims: list[tuple[str, int, str]]) -> None:
        """Keep (entry, slot, token) claims that a later claim moved past, so that their
        claimers can still hand them over; forget those older than HANDOVER_KEEP_MS."""
        if not claims:
            return
        claimed = self._tables.claimed
        cur.execute(
            f"DELETE FROM {claimed} WHERE recorded_at < statement_timestamp() - %s * interval"
            " '1 millisecond'",
            (HANDOVER_KEEP_MS,),
        )
        entries, slots, tokens = (list(column) for column in zip(*claims, strict=True))
        cur.execute(
            f"INSERT INTO {claimed} (entry, slot, token, recorded_at) SELECT e, s, t,"
            " clock_timestamp() FROM unnest(%b::text[], %b::bigint[], %b::text[]) AS c (e, s, t)"
            " ON CONFLICT (entry, slot, token) DO UPDATE SET recorded_at = excluded.recorded_at",
            (entries, slots, tokens),
        )

    def hand_over(self, token: str, slots: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        check_token(token)
        wanted = [(entry, int(slot)) for entry, slot in slots]
        if not wanted:
            return set()
        t = self._tables
        with self._database.transaction() as cur:
            self._holder(cur)  # no lease needed, but claims must not interleave
            stored = self._stored(cur, sorted({entry for entry, _ in wanted}))
            by_fence, by_kept = plan_hand_over(token, wanted, stored)
            handed = set(by_fence)
            if by_fence:
                # The proof is used up: the fence no longer names its claimer.
                entries = [entry for entry, _ in by_fence]
                cur.execute(f"UPDATE {t.fired} SET token = '-' WHERE entry = ANY(%b)", (entries,))
            for entry, slot in by_kept:
                cur.execute(
                    f"DELETE FROM {t.claimed} WHERE entry = %s AND slot = %s AND token = %s"
                    f" AND recorded_at >= clock_timestamp() - %s * interval '1 millisecond'",
                    (entry, slot, token, HANDOVER_KEEP_MS),
                )
                if cur.rowcount:
                    handed.add((entry, slot))
            if handed:
                entries, slots_ = (list(column) for column in zip(*handed, strict=True))
                cur.execute(
                    f"INSERT INTO {t.handed} (entry, slot) SELECT * FROM unnest(%b::text[],"
                    " %b::bigint[]) ON CONFLICT DO NOTHING",
                    (entries, slots_),
                )
        return handed

    def take_handed(self, token: str) -> list[tuple[str, int]]:
        check_token(token)
        with self._database.transaction() as cur:
            if not self._holds(cur, token):
                return []
            cur.execute(f"DELETE FROM {self._tables.handed} RETURNING entry, slot")
            taken = sorted(
                ((entry, int(slot)) for entry, slot in cur.fetchall()),
                key=lambda pair: (pair[1], pair[0]),
            )
            self._keep_claims(cur, [(entry, slot, token) for entry, slot in taken])
        return taken

    def unclaim(
        self, token: str, slots: Mapping[str, int], runs: Mapping[str, str] | None = None
    ) -> set[str]:
        if not slots:
            return set()
        with self._database.transaction() as cur:
            if not self._holds(cur, token):
                return set()
            for entry, task_id in (runs or {}).items():
                if entry in slots:
                    self._runs.drop(cur, entry, task_id)
            given, restored = plan_give_back(token, slots, self._rows(cur, list(slots)))
            if given:
                cur.execute(
                    f"DELETE FROM {self._tables.fired} WHERE entry = ANY(%b)", (list(given),)
                )
            self._write(cur, restored)
            sent.drop(cur, self._tables, ((entry, slots[entry]) for entry in given))
        return given

    def anchor(self, token: str, anchors: Mapping[str, tuple[int, str]]) -> dict[str, Fence]:
        if not anchors:
            return {}
        with self._database.transaction() as cur:
            if not self._holds(cur, token):
                return {}
            fences, rows = plan_anchors(anchors, self._stored(cur, list(anchors)))
            self._write(cur, rows)
        return fences

    def fences(self, entries: Iterable[str] | None = None) -> dict[str, Fence]:
        with self._database.transaction() as cur:
            return self._stored(cur, None if entries is None else list(entries))

    def forget(self, token: str, entries: Iterable[str]) -> bool:
        entries = list(entries)
        with self._database.transaction() as cur:
            if not self._holds(cur, token):
                return False
            for chunk in chunks(entries):
                cur.execute(f"DELETE FROM {self._tables.fired} WHERE entry = ANY(%b)", (chunk,))
                retire_histories(cur, self._tables, chunk)
            return True

    # Run leases ------------------------------------------------------------------------------

    def hold_run(self, entry: str, task_id: str, ttl_ms: int) -> bool:
        return self._runs.hold_run(entry, task_id, ttl_ms)

    def renew_runs(self, runs: Mapping[str, str], ttl_ms: int) -> set[str]:
        return self._runs.renew_runs(runs, ttl_ms)

    def release_run(self, entry: str, task_id: str) -> bool:
        return self._runs.release_run(entry, task_id)

    def running(self, entries: Iterable[str] | None = None) -> dict[str, str]:
        return self._runs.running(entries)

    # Shared documents, history, heartbeats ---------------------------------------------------

    def shared(self, name: str) -> str | None:
        with self._database.transaction() as cur:
            cur.execute(f"SELECT value FROM {self._tables.shared} WHERE name = %s", (name,))
            row = cur.fetchone()
        return None if row is None else str(row[0])

    def share(self, token: str, name: str, value: str) -> bool:
        with self._database.transaction() as cur:
            if not self._holds(cur, token):
                return False
            cur.execute(
                f"INSERT INTO {self._tables.shared} (name, value) VALUES (%s, %s)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (name, value),
            )
            return True

    def _record(self, cur: Any, history: History) -> None:
        history_of.append(cur, self._tables, history)

    def record(self, history: History) -> None:
        if not history:
            return
        with self._database.transaction() as cur:
            self._record(cur, history)

    def history(self, entry: str, limit: int = HISTORY_CAP) -> list[str]:
        if limit <= 0:
            return []
        with self._database.transaction() as cur:
            return history_of.newest(cur, self._tables, entry, limit)

    def heartbeat(self, token: str, role: str, ttl_ms: int, schedule_digest: str = "") -> None:
        check_ttl(ttl_ms)
        check_digest(schedule_digest)  # as Redis requires, so a digest works in every store
        beats = self._tables.beats
        with self._database.transaction() as cur:
            purge_histories(cur, self._tables)
            cur.execute(f"DELETE FROM {beats} WHERE expires_at <= clock_timestamp()")
            cur.execute(
                f"INSERT INTO {beats} (token, role, last_seen_ms, expires_at, digest)"
                f" VALUES (%s, %s, {NOW_MS}, {LATER}, %s) ON CONFLICT (token) DO UPDATE SET"
                " role = excluded.role, last_seen_ms = excluded.last_seen_ms,"
                " expires_at = excluded.expires_at, digest = excluded.digest",
                (token, role, ttl_ms, schedule_digest),
            )

    def beats(self) -> list[BeatInfo]:
        with self._database.transaction() as cur:
            cur.execute(
                f"SELECT token, last_seen_ms, role, digest FROM {self._tables.beats}"
                " WHERE expires_at > clock_timestamp() ORDER BY last_seen_ms DESC, token"
            )
            return [BeatInfo(token, int(seen), role, digest) for token, seen, role, digest in cur]

    def ping(self) -> None:
        with self._database.transaction() as cur:
            cur.execute("SELECT 1")

    def close(self) -> None:
        self._database.close()
