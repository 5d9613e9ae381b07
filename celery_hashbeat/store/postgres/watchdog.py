"""Cutting off a PostgreSQL server that stops answering mid-statement.

``statement_timeout`` is the server's own limit and needs a server that still runs; a frozen
server (SIGSTOP, a stalled VM) or a network that drops packets leaves the client blocked in a read
until TCP gives up, minutes later, past any lease. So each round trip to the server is watched:
one thread per connection sleeps until the armed deadline and, if the round trip is still under
way then, shuts the connection's socket, which makes the blocked call fail (StoreUnavailable).
Only round trips are timed, not the store's own work between them, so a large but healthy
transaction (a first take-over of 100,000 entries) is never cut.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any


class Watchdog:
    """Cuts ``conn`` when one armed round trip lasts longer than ``limit_s``."""

    def __init__(self, limit_s: float) -> None:
        self._limit_s = limit_s
        self._changed = threading.Condition()
        self._deadline: float | None = None
        self._conn: Any = None
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextlib.contextmanager
    def armed(self, conn: Any) -> Iterator[None]:
        with self._changed:
            self._conn, self._deadline = conn, time.monotonic() + self._limit_s
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="hashbeat-postgres-watchdog", daemon=True
                )
                self._thread.start()
            self._changed.notify()
        try:
            yield
        finally:
            with self._changed:
                self._conn, self._deadline = None, None

    def _watch(self) -> None:
        with self._changed:
            while not self._closed:
                if self._deadline is None:
                    self._changed.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._changed.wait(left)
                    continue
                cut(self._conn)
                self._deadline = None

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify()


def cut(conn: Any) -> None:
    """Shut the socket of ``conn``: its blocked call fails at once."""
    with contextlib.suppress(Exception), socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock:
        sock.shutdown(socket.SHUT_RDWR)


class Cursor:
    """A psycopg cursor whose every round trip is watched; the rest is the cursor's own."""

    def __init__(self, cursor: Any, conn: Any, watchdog: Watchdog) -> None:
        self._cursor = cursor
        self._conn = conn
        self._watchdog = watchdog

    def execute(self, query: Any, params: Any = None) -> Cursor:
        with self._watchdog.armed(self._conn):
            self._cursor.execute(query, params)
        return self

    def executemany(self, query: Any, params: Any) -> None:
        with self._watchdog.armed(self._conn):
            self._cursor.executemany(query, params)

    def __getattr__(self, name: str) -> Any:  # fetchone, fetchall, rowcount, description
        return getattr(self._cursor, name)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor)
