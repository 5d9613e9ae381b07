"""One connection to PostgreSQL, its transactions, and psycopg's errors in the protocol's words.

Every change is one transaction. The connection keeps no state between transactions, so that it
works behind PgBouncer's transaction pooling: no session advisory lock, no LISTEN, no prepared
statement (``prepare_threshold=None``), no ``SET`` outside a transaction (each transaction sets
its own ``statement_timeout`` and ``lock_timeout`` with ``SET LOCAL``). A server that stops
answering mid-statement (frozen, or a network that drops packets) is cut off by a watchdog after
the timeout (watchdog.py), so no call hangs past a lease. A failure after the ``COMMIT`` was sent
and before its reply came is StoreUnavailable: the change may or may not have been made, the same
rule as a Redis reply lost (docs/design.md §5).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery_hashbeat.store.errors import StoreAuthError, StoreError, StoreReadOnly, StoreUnavailable
from celery_hashbeat.store.postgres.connect import Target, psycopg
from celery_hashbeat.store.postgres.schema import Tables, prepare
from celery_hashbeat.store.postgres.watchdog import Cursor, Watchdog

#: SQLSTATE classes and codes that mean "not now" rather than "never".
TRANSIENT_CLASSES = ("08", "40", "53", "57", "58", "55P03")
#: A read-only transaction: a standby (hot_standby), or default_transaction_read_only.
READ_ONLY = "25006"
#: Codes that mean "retrying will not help until the settings or grants change".
REFUSED = {
    "28P01": "the password or user was refused",
    "28000": "the server refused this user or host (pg_hba.conf)",
    "3D000": "the database does not exist",
    "42501": "the role lacks a privilege",
}
#: libpq's words for the same, when a connection attempt fails before any SQLSTATE.
REFUSED_WORDS = {
    "password authentication failed": "28P01",
    "no pg_hba.conf entry": "28000",
    "does not exist": "3D000",
    "permission denied": "42501",
}
FIXES = {
    "28P01": "set the right user and password in hashbeat_store_url",
    "28000": "allow this user and host in the server's pg_hba.conf, or connect as another user",
    "3D000": "create the database (createdb) or name an existing one in hashbeat_store_url",
    "42501": "grant the role CONNECT on the database and CREATE, USAGE on its schema (docs/ha.md)",
}


class Database:
    """One connection, shared by the store's threads one transaction at a time, made on first
    use and again after a failure; the prefix's tables are prepared on the first transaction of
    each connection."""

    def __init__(self, target: Target, tables: Tables) -> None:
        self._target = target
        self._tables = tables
        self._lock = threading.Lock()
        self._conn: Any = None
        self.url = target.url
        # A second beyond the server's own limit, so that a live server's timeout comes first.
        self._watchdog = Watchdog(target.timeout_s + 1.0)

    def _connect(self) -> Any:
        module = psycopg()
        params = dict(self._target.params)
        params.setdefault("connect_timeout", max(2, math.ceil(self._target.connect_timeout_s)))
        params.setdefault("application_name", "celery-hashbeat")
        conn = module.connect(autocommit=True, prepare_threshold=None, **params)
        try:
            with self._guarded(conn) as cur:
                prepare(cur, self._tables)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _guarded(self, conn: Any) -> Iterator[Any]:
        """A transaction on ``conn``, with the server-side timeouts and the watchdog."""
        timeout_ms = max(1, int(self._target.timeout_s * 1000))
        cur = Cursor(conn.cursor(), conn, self._watchdog)
        cur.execute(
            f"BEGIN; SET LOCAL statement_timeout = {timeout_ms};"
            f" SET LOCAL lock_timeout = {timeout_ms}"
        )
        try:
            yield cur
        except BaseException:
            if not conn.closed:
                cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One transaction: its cursor, committed when the block ends, rolled back on error."""
        module = psycopg()
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = None
                    self._conn = self._connect()
                with self._guarded(self._conn) as cur:
                    yield cur
            except module.Error as exc:
                error = self.translate(exc)
                if self._conn is not None and (
                    isinstance(error, StoreUnavailable) or self._conn.info.transaction_status != 0
                ):
                    self._drop()
                raise error from None

    def translate(self, exc: Exception) -> StoreError:
        """The protocol's error for ``exc``: one line, naming the store, never the password."""
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        secret = self._target.secret
        if secret:
            text = text.replace(secret, "***")
        code = getattr(exc, "sqlstate", None) or next(
            (code for words, code in REFUSED_WORDS.items() if words in text), None
        )
        if code in REFUSED:
            return StoreAuthError(
                f"PostgreSQL store {self.url}: {REFUSED[code]} ({text}): {FIXES[code]}"
            )
        if code == READ_ONLY:
            return StoreReadOnly(
                f"PostgreSQL store {self.url} is read-only ({text}): point hashbeat_store_url at "
                "the primary (with several hosts, add ?target_session_attrs=read-write); "
                "will retry"
            )
        module = psycopg()
        if isinstance(exc, module.OperationalError) or (code or "").startswith(TRANSIENT_CLASSES):
            return StoreUnavailable(
                f"PostgreSQL store {self.url} is not answering ({text}); will retry"
            )
        return StoreError(f"PostgreSQL store {self.url} failed: {type(exc).__name__}: {text}")

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        with contextlib.suppress(Exception):  # a broken connection may fail to close; gone anyway
            conn.close()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._drop()
        self._watchdog.close()
