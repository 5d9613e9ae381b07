"""Every table and index of the PostgreSQL store, spelled in this one place, and the step that
makes them (docs/design.md §5).

Each prefix (``hashbeat_key_prefix``) has tables of its own, named ``<prefix>_<kind>``, so several
apps share one database and a prefix is dropped by dropping its tables. The ``<prefix>_meta`` row
``schema`` holds the schema version. ``prepare`` creates what is missing (first use) and brings an
older schema up to this one, step by step (``upgrades``), inside one transaction that holds a
transaction-level advisory lock, so that beats starting together do not race (a session lock
would not survive PgBouncer's transaction pooling). A schema newer than this release knows is
refused (StoreError): an older release must not write into tables it does not understand.
"""

from __future__ import annotations

from typing import Any

from celery_hashbeat.store.errors import StoreConfigError, StoreError

SCHEMA_VERSION = 6

#: The table kinds; their names are ``<prefix>_<kind>``.
KINDS = (
    "meta",
    "lease",
    "fired",
    "beats",
    "running",
    "shared",
    "history",
    "history_life",
    "controls",
    "triggers",
    "claimed",
    "handed",
    "audit",
    "schedules",
    "sent",
)
#: The longest name suffix made from a prefix (an index name), so the prefix must leave room
#: under PostgreSQL's 63-byte identifiers.
LONGEST_SUFFIX = len("_history_life_expires")
MAX_IDENTIFIER = 63


def quote(name: str) -> str:
    """``name`` as a quoted identifier, whatever characters the prefix holds."""
    return '"' + name.replace('"', '""') + '"'


class Tables:
    """The quoted names of one prefix's tables, as attributes (``tables.fired``)."""

    def __init__(self, prefix: str) -> None:
        if "\x00" in prefix or len(prefix.encode()) + LONGEST_SUFFIX > MAX_IDENTIFIER:
            raise StoreConfigError(
                f"hashbeat_key_prefix={prefix!r} is not usable with a PostgreSQL store: its "
                f"tables are named after it, so give a prefix of at most "
                f"{MAX_IDENTIFIER - LONGEST_SUFFIX} bytes without NUL"
            )
        self.prefix = prefix
        for kind in KINDS:
            setattr(self, kind, quote(f"{prefix}_{kind}"))

    def __getattr__(self, kind: str) -> str:  # for mypy: the attributes set above
        raise AttributeError(kind)

    def index(self, name: str) -> str:
        return quote(f"{self.prefix}_{name}")


def statements(t: Tables) -> list[str]:
    """The schema of one prefix; every statement is idempotent."""
    return [
        # Named values: 'schema' (the schema version) and 'version' (the runtime controls').
        f"CREATE TABLE IF NOT EXISTS {t.meta} (name text PRIMARY KEY, value bigint NOT NULL)",
        f"INSERT INTO {t.meta} (name, value) VALUES ('version', 0), ('floor', 0)"
        " ON CONFLICT DO NOTHING",
        # One row, locked FOR UPDATE by every change that must not interleave with another
        # (store.py): the lease holder and when the lease ends, on the server's clock.
        f"CREATE TABLE IF NOT EXISTS {t.lease} (one boolean PRIMARY KEY DEFAULT true"
        " CHECK (one), token text NOT NULL, expires_at timestamptz NOT NULL)",
        f"INSERT INTO {t.lease} (token, expires_at) VALUES ('', 'epoch') ON CONFLICT DO NOTHING",
        # The fences (store/values.py): one row per entry, its fields as columns.
        f"CREATE TABLE IF NOT EXISTS {t.fired} (entry text PRIMARY KEY, slot bigint NOT NULL,"
        " token text NOT NULL DEFAULT '-', previous text NOT NULL DEFAULT '',"
        " fingerprint text NOT NULL DEFAULT '', runs bigint NOT NULL DEFAULT 0)",
        f"CREATE TABLE IF NOT EXISTS {t.beats} (token text PRIMARY KEY, role text NOT NULL,"
        " last_seen_ms bigint NOT NULL, expires_at timestamptz NOT NULL,"
        " digest text NOT NULL DEFAULT '')",
        f"CREATE TABLE IF NOT EXISTS {t.running} (entry text PRIMARY KEY, task_id text NOT NULL,"
        " expires_at timestamptz NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {t.shared} (name text PRIMARY KEY, value text NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {t.history} (id bigserial PRIMARY KEY, entry text NOT NULL,"
        " record text NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {t.index('history_entry')} ON {t.history} (entry, id)",
        # Until when each entry's history lives (store/postgres/lifetimes.py),
        # and how many records it gained since it was last trimmed (store/postgres/history.py).
        f"CREATE TABLE IF NOT EXISTS {t.history_life} (entry text PRIMARY KEY,"
        " expires_at timestamptz NOT NULL, untrimmed integer NOT NULL DEFAULT 0)",
        f"CREATE INDEX IF NOT EXISTS {t.index('history_life_expires')} ON {t.history_life}"
        " (expires_at)",
        # The runtime controls (store/controls.py): a row per name that stays after its records
        # go (so a beat still learns of the removal) until GONE_TTL_MS after they went
        # (removed_at), with the version of its last change; 'floor' in meta is the newest
        # version of a dropped one (lifetimes.py).
        f"CREATE TABLE IF NOT EXISTS {t.controls} (name text PRIMARY KEY, definition text,"
        " pause text, version bigint NOT NULL, removed_at timestamptz)",
        f"CREATE INDEX IF NOT EXISTS {t.index('controls_version')} ON {t.controls} (version)",
        f"CREATE INDEX IF NOT EXISTS {t.index('controls_removed')} ON {t.controls} (removed_at)"
        " WHERE removed_at IS NOT NULL",
        # The triggers waiting in id order, each with the token of the leader that took it and
        # has not settled it ('' while queued: store/postgres/controls.py).
        f"CREATE TABLE IF NOT EXISTS {t.triggers} (id bigserial PRIMARY KEY, record text NOT NULL,"
        " taken_by text NOT NULL DEFAULT '')",
        # Claims that a later claim by another beat moved past, kept HANDOVER_KEEP_MS so their
        # claimers can hand them over; and the slots handed over, for the leader to take.
        f"CREATE TABLE IF NOT EXISTS {t.claimed} (entry text NOT NULL, slot bigint NOT NULL,"
        " token text NOT NULL, recorded_at timestamptz NOT NULL,"
        " PRIMARY KEY (entry, slot, token))",
        f"CREATE INDEX IF NOT EXISTS {t.index('claimed_age')} ON {t.claimed} (recorded_at)",
        f"CREATE TABLE IF NOT EXISTS {t.handed} (entry text NOT NULL, slot bigint NOT NULL,"
        " PRIMARY KEY (entry, slot))",
        # The operators' records (store/operations.py): the audit trail in arrival (id) order
        # with when the server took each; the definitions each schedule digest runs.
        f"CREATE TABLE IF NOT EXISTS {t.audit} (id bigserial PRIMARY KEY, at_ms bigint NOT NULL,"
        " record text NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {t.schedules} (digest text PRIMARY KEY,"
        " at_ms bigint NOT NULL, definitions text NOT NULL)",
        # The record of sent slots (store/sent.py): each (entry, slot) claimed, keyed slot
        # first so that a tick's new slots land together at the end and the trim by age is a
        # range; when recording began is the meta row 'sent_since' (store/postgres/sent.py).
        f"CREATE TABLE IF NOT EXISTS {t.sent} (slot bigint NOT NULL, entry text NOT NULL,"
        " claimer text NOT NULL DEFAULT '', PRIMARY KEY (slot, entry))",
    ]


def upgrades(t: Tables) -> dict[int, list[str]]:
    """The steps from each schema version to the next: ``upgrades(t)[n]`` takes version n to
    n + 1. A release that changes the schema raises SCHEMA_VERSION and adds its step here
    (``ALTER TABLE ... ADD COLUMN ... DEFAULT ...``), so tables of every earlier release open in
    place."""
    return {
        # Schema 2 adds the audit and schedules tables, which ``statements`` makes after the
        # steps; schema 3 the record of sent slots, likewise.
        1: [],
        2: [],
        # Schema 4: which backfill claim recorded a sent slot (store/postgres/sent.py); the
        # table is missing still when upgrading from before schema 3.
        3: [
            f"ALTER TABLE IF EXISTS {t.sent}"
            " ADD COLUMN IF NOT EXISTS claimer text NOT NULL DEFAULT ''"
        ],
        # Schema 5: a take keeps what it took until its leader settles (docs/design.md §19).
        4: [f"ALTER TABLE {t.triggers} ADD COLUMN IF NOT EXISTS taken_by text NOT NULL DEFAULT ''"],
        # Schema 6: a history is trimmed once per TRIM_EVERY records (store/postgres/history.py).
        5: [
            f"ALTER TABLE {t.history_life}"
            " ADD COLUMN IF NOT EXISTS untrimmed integer NOT NULL DEFAULT 0"
        ],
    }


def prepare(cur: Any, t: Tables) -> None:
    """Create the prefix's tables if missing and upgrade them, in the caller's transaction."""
    # A transaction-level lock (released at commit), keyed by the prefix's tables.
    cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (t.meta,))
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (t.handed,))
    row = cur.fetchone()
    if row is not None and row[0]:
        cur.execute(f"SELECT value FROM {t.meta} WHERE name = 'schema'")
        found = cur.fetchone()
        version = SCHEMA_VERSION if found is None else int(found[0])
        if version > SCHEMA_VERSION:
            # StoreError, not StoreConfigError: found at run time, logged as one line, retried.
            raise StoreError(
                f"the PostgreSQL tables of prefix {t.prefix!r} have schema version {version}, "
                f"newer than this release's {SCHEMA_VERSION}: upgrade celery-hashbeat on every "
                "beat, worker and tool that uses them"
            )
        steps = upgrades(t)
        for step in range(version, SCHEMA_VERSION):
            for statement in steps[step]:
                cur.execute(statement)
        if version == SCHEMA_VERSION and found is not None:
            return
    for statement in statements(t):
        cur.execute(statement)
    cur.execute(
        f"INSERT INTO {t.meta} (name, value) VALUES ('schema', %s)"
        " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        (SCHEMA_VERSION,),
    )
