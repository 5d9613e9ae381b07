"""What only the PostgreSQL store does: its errors, its tables, its clock, its faults, its plans.

The protocol itself is checked on every store by the suite beside this file; these tests run on
the session's private PostgreSQL (tests/support/postgres.py) and its fault proxy.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from unittest import mock

import pytest

from celery_hashbeat.store import (
    StoreAuthError,
    StoreConfigError,
    StoreReadOnly,
    StoreUnavailable,
    open_store,
)
from celery_hashbeat.store.base import HISTORY_CAP
from celery_hashbeat.store.errors import StoreError
from celery_hashbeat.store.postgres.history import TRIM_EVERY
from celery_hashbeat.store.postgres.schema import SCHEMA_VERSION
from celery_hashbeat.store.postgres.sent import TRIM_AT_LEAST
from tests.support.postgres import PASSWORD, PostgresServer, wait_answering
from tests.support.processes import ROOT
from tests.support.proxy import FaultProxy


def database_of(url: str) -> str:
    return url.rpartition("/")[2]


def through(proxy: FaultProxy, server: PostgresServer, url: str) -> str:
    """``url`` by way of the fault proxy in front of ``server``."""
    return url.replace(f":{server.port}/", f":{proxy.port}/")


def test_a_wrong_password_is_one_line_that_hides_it_and_names_the_fix(postgres_url: str) -> None:
    store = open_store(postgres_url.replace(PASSWORD, "not-the-password-42"), "p")
    with pytest.raises(StoreAuthError) as refused:
        store.ping()
    text = str(refused.value)
    assert "\n" not in text
    assert "not-the-password-42" not in text
    assert "password authentication failed" in text
    assert "set the right user and password in hashbeat_store_url" in text


def test_an_unknown_database_is_one_line_that_says_create_it(postgres_url: str) -> None:
    store = open_store(postgres_url.rpartition("/")[0] + "/no_such_db", "p")
    with pytest.raises(StoreAuthError) as refused:
        store.ping()
    text = str(refused.value)
    assert "\n" not in text and PASSWORD not in text
    assert 'database "no_such_db" does not exist' in text
    assert "createdb" in text


def test_a_role_that_may_not_create_tables_is_told_which_grants_it_needs(
    postgres_server: PostgresServer,
) -> None:
    name = postgres_server.create_database(owner="postgres")
    postgres_server.admin("CREATE ROLE weak LOGIN PASSWORD 'weak-pw'")
    try:
        store = open_store(postgres_server.url(name, "weak", "weak-pw"), "p")
        with pytest.raises(StoreAuthError) as refused:
            store.ping()
        text = str(refused.value)
        assert "\n" not in text and "weak-pw" not in text
        assert "the role lacks a privilege" in text and "permission denied" in text
        assert "CREATE, USAGE on its schema" in text
        store.close()
    finally:
        postgres_server.drop_database(name)
        postgres_server.admin("DROP ROLE weak")


def test_min_replicas_is_refused_saying_replication_is_the_servers_business() -> None:
    with pytest.raises(StoreConfigError, match="synchronous_commit/synchronous_standby_names"):
        open_store("postgresql://u:pw@db.example/app", "p", min_replicas=1)


def test_a_url_libpq_cannot_read_is_a_config_error_without_the_password() -> None:
    with pytest.raises(StoreConfigError) as wrong:
        open_store("postgresql://u:hidden-pw@db.example/app?nosuch=1", "p")
    text = str(wrong.value)
    assert 'invalid URI query parameter: "nosuch"' in text
    assert "hidden-pw" not in text and "hashbeat_store_url" in text


def test_a_prefix_too_long_for_table_names_is_a_config_error() -> None:
    with pytest.raises(StoreConfigError, match="tables are named after it"):
        open_store("postgresql://u@db.example/app", "x" * 60)


def test_without_psycopg_the_one_line_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from celery_hashbeat.store import open_store, StoreConfigError\n"
        "try:\n"
        "    open_store('postgresql://u:pw@db.example/app', 'p')\n"
        "except StoreConfigError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert "psycopg 3, which is not installed" in done.stdout
    assert "pip install 'celery-hashbeat[postgres]'" in done.stdout
    assert done.stdout.count("\n") == 1


def test_each_prefix_has_tables_of_its_own_with_the_schema_version(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    first, second = open_store(postgres_url, "app-one"), open_store(postgres_url, "app-two")
    assert first.acquire("a", 60_000)
    assert second.acquire("b", 60_000)  # another app, another lease
    database = database_of(postgres_url)
    tables = {
        row[0]
        for row in postgres_server.query(
            database, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        )
    }
    assert {"app-one_fired", "app-one_lease", "app-two_fired", "app-two_lease"} <= tables
    versions = postgres_server.query(
        database, """SELECT value FROM "app-one_meta" WHERE name = 'schema'"""
    )
    assert versions == [(SCHEMA_VERSION,)]
    first.close()
    second.close()


def test_tables_of_a_newer_release_are_refused(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    store = open_store(postgres_url, "p")
    store.ping()
    store.close()
    postgres_server.admin(
        f"""UPDATE "p_meta" SET value = {SCHEMA_VERSION + 1} WHERE name = 'schema'""",
        database=database_of(postgres_url),
    )
    again = open_store(postgres_url, "p")
    with pytest.raises(StoreError, match="newer than this release's"):
        again.ping()
    again.close()


def test_the_lease_runs_on_the_servers_clock_not_the_beats(postgres_url: str) -> None:
    store = open_store(postgres_url, "p")
    assert store.acquire("a", 60_000)
    hour_later = time.time() + 3600
    with (
        mock.patch("time.time", return_value=hour_later),
        mock.patch("time.monotonic", return_value=time.monotonic() + 3600),
    ):
        leader = store.leader()
        assert leader is not None and leader.token == "a"
        assert 50_000 < leader.ttl_left_ms <= 60_000
        assert not store.acquire("b", 60_000)
    store.close()


def test_a_lost_commit_reply_is_unavailable_and_the_retry_recognises_the_claim(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    with FaultProxy(postgres_server.port) as proxy:
        store = open_store(through(proxy, postgres_server, postgres_url), "p", timeout=1)
        assert store.acquire("a", 60_000)
        proxy.swallow_reply_to(b"COMMIT", 60)
        with pytest.raises(StoreUnavailable, match="is not answering"):
            store.claim("a", {"e": (1000, "f")})
        assert proxy.wait_triggered(1)
        proxy.pass_through()
        direct = open_store(postgres_url, "p")
        fence = direct.fences()["e"]
        assert (fence.slot, fence.token, fence.runs) == (1000, "a", 1)  # it did commit
        assert store.claim("a", {"e": (1000, "f")}) == {"e"}
        assert direct.fences()["e"].runs == 1  # the retry of its own claim added nothing
        store.close()
        direct.close()


def test_a_hung_server_is_cut_off_as_unavailable_and_answers_once_back(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    with FaultProxy(postgres_server.port) as proxy:
        store = open_store(through(proxy, postgres_server, postgres_url), "p", timeout=1)
        assert store.acquire("a", 60_000)
        proxy.hang()
        with pytest.raises(StoreUnavailable):
            store.ping()
        proxy.pass_through()
        assert store.leader() is not None
        store.close()


def test_a_database_crash_is_unavailable_and_the_fences_survive_the_restart(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    store = open_store(postgres_url, "p", timeout=2)
    assert store.acquire("a", 60_000)
    assert store.claim("a", {"e": (1000, "f")}) == {"e"}
    postgres_server.stop("immediate")
    try:
        with pytest.raises(StoreUnavailable):
            store.claim("a", {"e": (2000, "f")})
    finally:
        postgres_server.start()
        wait_answering(postgres_server)
    assert store.fences()["e"].slot == 1000
    assert store.claim("a", {"e": (2000, "f")}) == {"e"}
    store.close()


#: The tables whose rows grow with the entries (the record of sent slots: with the slots): a
#: hot-path statement must find rows by index.
GROWING = (
    "_fired",
    "_history",
    "_history_life",
    "_claimed",
    "_running",
    "_controls",
    "_handed",
    "_sent",
)


def test_the_hot_path_finds_rows_by_index_among_many_entries(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """The plans the server chose for the store's own statements (auto_explain), at 20,000
    entries, each with a history and a claim of another beat kept for its hand-over: a claim, a
    fence lookup, a history read and write, a hand-over."""
    database = database_of(postgres_url)
    store = open_store(postgres_url, "p")
    many = {f"entry-{i}": (1000, "f") for i in range(20_000)}
    assert store.acquire("a", 60_000)
    assert len(store.claim("a", many, history=[(name, "sent") for name in many])) == 20_000
    assert store.release("a")
    assert store.acquire("b", 60_000)  # b's claims move past a's, which are kept
    assert len(store.claim("b", dict.fromkeys(many, (2000, "f")))) == 20_000
    postgres_server.admin("ANALYZE", database=database)
    postgres_server.admin(
        f"ALTER DATABASE {database} SET session_preload_libraries = 'auto_explain'",
        f"ALTER DATABASE {database} SET auto_explain.log_min_duration = 0",
        f"ALTER DATABASE {database} SET log_min_messages = 'log'",
    )
    store.close()
    log = Path(postgres_server.root) / "log"
    start = log.stat().st_size
    store = open_store(postgres_url, "p")
    assert store.claim("b", {"entry-7": (3000, "f")}, history=[("entry-7", "sent")]) == {"entry-7"}
    assert store.fences(["entry-8"])["entry-8"].slot == 2000
    assert store.history("entry-7", 5)[0] == "sent"
    assert store.hand_over("a", [("entry-9", 1000)]) == {("entry-9", 1000)}
    store.close()
    with log.open() as text:
        text.seek(start)
        plans = text.read()
    scanned = re.findall(r"Seq Scan on \"?(\S+?)\"?\s", plans)
    assert "Index" in plans
    assert not [table for table in scanned if table.endswith(GROWING)], plans


def test_a_claim_trims_the_oldest_expired_records_of_sent_slots_a_bounded_number_at_a_time(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """A record of sent slots that grew while nobody claimed (days of slots) is trimmed oldest
    first over the next claims, TRIM_AT_LEAST besides twice the slots each records, never all
    in one statement under the lease's timeout; what is within SENT_KEEP_MS stays."""
    database = database_of(postgres_url)
    store = open_store(postgres_url, "aged")
    try:
        assert store.acquire("a", 60_000)
        now = int(time.time() * 1000)
        assert store.claim("a", {"x": (now, "f")}) == {"x"}
        expired = 2 * TRIM_AT_LEAST + 500
        postgres_server.admin(
            f"""INSERT INTO "aged_sent" (entry, slot) SELECT 'old', g"""
            f" FROM generate_series(1, {expired}) AS g",
            database=database,
        )
        left = []
        for k in range(1, 4):
            assert store.claim("a", {"x": (now + k, "f")}) == {"x"}
            left += postgres_server.query(
                database, """SELECT count(*), min(slot) FROM "aged_sent" WHERE entry = 'old'"""
            )
        per_claim = TRIM_AT_LEAST + 2
        assert left == [
            (expired - per_claim, per_claim + 1),
            (expired - 2 * per_claim, 2 * per_claim + 1),
            (0, None),
        ]
        assert store.recorded("x", [now, now + 1, now + 2, now + 3]).sent == {
            now,
            now + 1,
            now + 2,
            now + 3,
        }
    finally:
        store.close()


def test_a_first_take_over_of_many_entries_is_not_cut_by_the_timeout(postgres_url: str) -> None:
    """The timeout bounds each round trip, not the whole transaction: 50,000 anchors and claims
    (a first take-over of a large schedule) complete with a one-second timeout."""
    store = open_store(postgres_url, "p", timeout=1)
    many = {f"entry-{i}": (1000, "f") for i in range(50_000)}
    assert store.acquire("a", 600_000)
    assert len(store.anchor("a", many)) == 50_000
    assert len(store.claim("a", dict.fromkeys(many, (2000, "f")))) == 50_000
    assert len(store.fences()) == 50_000
    store.close()


def test_a_read_only_server_is_store_read_only_naming_the_primary(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """A standby, or a database set read-only, refuses the writes: StoreReadOnly (retried), in
    one line that says to point the URL at the primary."""
    store = open_store(postgres_url, "p")
    store.ping()  # the tables exist; from now on the database refuses writes
    database = database_of(postgres_url)
    postgres_server.admin(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
    store.close()
    store = open_store(postgres_url, "p")
    with pytest.raises(StoreReadOnly) as refused:
        store.acquire("a", 60_000)
    assert "\n" not in str(refused.value)
    assert "point hashbeat_store_url at the primary" in str(refused.value)
    assert store.leader() is None  # reads still answer
    store.close()


def test_a_worker_taking_a_run_lease_waits_for_a_claim_under_way(postgres_url: str) -> None:
    """A guarded claim reads the run leases, then grants one, under the lease row's lock; a
    worker's hold_run in between must wait for it and then see the claim's grant, not slip in
    and be overwritten (two tasks would both think they hold the entry)."""
    import psycopg  # noqa: PLC0415 - the other tests need no driver of their own

    store = open_store(postgres_url, "p")
    store.ping()
    results: list[bool] = []
    with psycopg.connect(postgres_url) as claim:  # a claim's transaction, step by step
        claim.execute('SELECT 1 FROM "p_lease" FOR UPDATE')
        claim.execute('SELECT entry, task_id FROM "p_running"')  # no run lease held yet
        worker = threading.Thread(target=lambda: results.append(store.hold_run("e", "t-w", 60_000)))
        worker.start()
        worker.join(0.5)
        claim.execute(
            "INSERT INTO \"p_running\" (entry, task_id, expires_at) VALUES ('e', 't-claim',"
            " clock_timestamp() + interval '1 minute') ON CONFLICT (entry) DO UPDATE SET"
            " task_id = excluded.task_id, expires_at = excluded.expires_at"
        )
        claim.commit()
    worker.join(10)
    assert results == [False]
    assert store.running() == {"e": "t-claim"}
    store.close()


def test_tables_of_schema_1_gain_the_operators_records_and_sent_slots_in_place(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """Schema 1 (the first PostgreSQL release) had no audit trail, running schedules nor record
    of sent slots: a release with them adds the tables, keeps what was stored and says its
    schema."""
    store = open_store(postgres_url, "old")
    store.ping()
    store.edit("kept", {"definition": '{"task": "t"}'})
    store.close()
    database = database_of(postgres_url)
    postgres_server.admin('DROP TABLE "old_audit", "old_schedules", "old_sent"', database=database)
    postgres_server.admin(
        """UPDATE "old_meta" SET value = 1 WHERE name = 'schema'""", database=database
    )
    again = open_store(postgres_url, "old")
    try:
        again.write_audit('{"action": "add"}')
        again.record_schedule("abcd", "{}")
        assert [text for _, text in again.audit_trail()] == ['{"action": "add"}']
        assert again.schedules() == {"abcd": "{}"}
        assert again.controls_of("kept")[0] == '{"task": "t"}'
        assert again.acquire("a", 60_000)
        assert again.claim("a", {"x": (5, "fp")}) == {"x"}
        assert again.recorded("x", [5]).sent == {5}
    finally:
        again.close()
    versions = postgres_server.query(
        database, """SELECT value FROM "old_meta" WHERE name = 'schema'"""
    )
    assert versions == [(SCHEMA_VERSION,)] and SCHEMA_VERSION == 6


def test_a_record_of_sent_slots_of_schema_3_learns_who_claimed_in_place(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """Schema 3's record of sent slots did not say which backfill claim recorded a slot: a
    release that does adds the column, keeps the slots recorded, and reads them as the regular
    path's."""
    store = open_store(postgres_url, "three")
    store.ping()
    assert store.acquire("a", 60_000)
    assert store.claim("a", {"x": (5, "fp")}) == {"x"}
    store.close()
    database = database_of(postgres_url)
    postgres_server.admin('ALTER TABLE "three_sent" DROP COLUMN claimer', database=database)
    postgres_server.admin(
        """UPDATE "three_meta" SET value = 3 WHERE name = 'schema'""", database=database
    )
    again = open_store(postgres_url, "three")
    try:
        assert again.recorded("x", [5]).sent == {5}
        now_ms = int(time.time() * 1000)
        first = again.claim_slots("a", "x", [now_ms, now_ms + 10], claimer="r1")
        retried = again.claim_slots("a", "x", [now_ms, now_ms + 10], claimer="r1")
        assert first is not None and first.claimed == (now_ms, now_ms + 10)
        assert retried is not None and retried.claimed == first.claimed
    finally:
        again.close()
    versions = postgres_server.query(
        database, """SELECT value FROM "three_meta" WHERE name = 'schema'"""
    )
    assert versions == [(SCHEMA_VERSION,)]


def test_a_queue_of_schema_4_learns_who_took_a_trigger_in_place(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """Schema 4's triggers had no record of who took them: a release that keeps a take until it
    is settled adds the column, and the triggers queued before it wait as queued."""
    store = open_store(postgres_url, "four")
    store.ask("t1")
    store.close()
    database = database_of(postgres_url)
    postgres_server.admin('ALTER TABLE "four_triggers" DROP COLUMN taken_by', database=database)
    postgres_server.admin(
        """UPDATE "four_meta" SET value = 4 WHERE name = 'schema'""", database=database
    )
    again = open_store(postgres_url, "four")
    try:
        assert again.acquire("a", 60_000)
        taken = again.take_triggers("a")
        assert taken == ["t1"] and taken.recovered == 0
        assert again.take_triggers("a").recovered == 1
        assert again.give_back_triggers("a", []) and again.triggers() == []
    finally:
        again.close()
    versions = postgres_server.query(
        database, """SELECT value FROM "four_meta" WHERE name = 'schema'"""
    )
    assert versions == [(SCHEMA_VERSION,)]


def test_a_history_written_a_record_at_a_time_stays_within_its_trim_bound(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """A history is trimmed once per TRIM_EVERY records, not at every one: its rows never pass
    HISTORY_CAP + TRIM_EVERY - 1, and a read still gives exactly the newest HISTORY_CAP."""
    store = open_store(postgres_url, "trim")
    database = database_of(postgres_url)
    most = 0
    try:
        for n in range(HISTORY_CAP + 3 * TRIM_EVERY):
            store.record([("x", str(n)), ("y", str(n))] if n % 2 else [("x", str(n))])
            ((rows,),) = postgres_server.query(
                database, """SELECT count(*) FROM "trim_history" WHERE entry = 'x'"""
            )
            most = max(most, rows)
        kept = store.history("x", limit=HISTORY_CAP + 50)
        assert kept == [
            str(n) for n in reversed(range(3 * TRIM_EVERY, HISTORY_CAP + 3 * TRIM_EVERY))
        ]
    finally:
        store.close()
    assert HISTORY_CAP < most <= HISTORY_CAP + TRIM_EVERY - 1


def test_histories_of_schema_5_are_trimmed_in_place(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    """Schema 5 trimmed a history at every record and kept no count: a release that trims once
    per TRIM_EVERY records adds the count, and the histories written before go on."""
    store = open_store(postgres_url, "five")
    store.record([("x", str(n)) for n in range(HISTORY_CAP)])
    store.close()
    database = database_of(postgres_url)
    postgres_server.admin(
        'ALTER TABLE "five_history_life" DROP COLUMN untrimmed', database=database
    )
    postgres_server.admin(
        """UPDATE "five_meta" SET value = 5 WHERE name = 'schema'""", database=database
    )
    again = open_store(postgres_url, "five")
    try:
        for n in range(HISTORY_CAP, HISTORY_CAP + TRIM_EVERY):
            again.record([("x", str(n))])
        assert again.history("x", limit=HISTORY_CAP) == [
            str(n) for n in reversed(range(TRIM_EVERY, HISTORY_CAP + TRIM_EVERY))
        ]
    finally:
        again.close()
    ((rows,),) = postgres_server.query(
        database, """SELECT count(*) FROM "five_history" WHERE entry = 'x'"""
    )
    assert rows == HISTORY_CAP  # trimmed when its TRIM_EVERY-th new record came
    versions = postgres_server.query(
        database, """SELECT value FROM "five_meta" WHERE name = 'schema'"""
    )
    assert versions == [(SCHEMA_VERSION,)]
