"""The SQLite file behind the store: its path from the URL, one connection, its transactions.

Every change is one ``BEGIN IMMEDIATE`` transaction, which takes the file's write lock up front,
so two processes never interleave a check and its write. Several prefixes may share one file.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from celery_hashbeat.store.errors import StoreReadOnly, StoreUnavailable
from celery_hashbeat.store.options import DEFAULT_TIMEOUT_S, Options, config_error
from celery_hashbeat.store.sqlite.schema import prepare


class Database:
    """One connection to the store's file (WAL mode, so readers never wait for a writer), shared
    by the store's threads one transaction at a time.

    Options, in the URL's query or as keywords: ``timeout``, the seconds to wait for another
    process's write lock before answering StoreUnavailable (default 3). ``transport_options``
    is accepted and ignored, so the same options can be handed to either store.

    Opening checks the path (StoreConfigError if it cannot be a database); a file that is locked
    at that moment is prepared on first use instead.
    """

    def __init__(self, url: str, options: Mapping[str, object]) -> None:
        self.path = _path(url)
        opts = Options(url, url.partition("?")[2], options, ("timeout", "transport_options"))
        timeout_s = opts.seconds("timeout", DEFAULT_TIMEOUT_S)
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._ready = False
        try:
            self._db = sqlite3.connect(
                self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False
            )
            self._prepare()
        except sqlite3.Error as exc:
            if not _busy(exc):
                fix = "give a writable SQLite file in a writable directory, or another path"
                raise config_error(url, self._describe(exc), fix) from exc

    def _prepare(self) -> None:
        prepare(self._db)
        self._ready = True

    def _describe(self, exc: sqlite3.Error) -> str:
        if _busy(exc):
            return f"{self.path} stayed locked by another process for {self._timeout_s}s"
        if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
            return f"{self.path} is not a SQLite database or is corrupt"
        return f"{self.path} cannot be used ({exc})"

    @contextmanager
    def transaction(self, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction; a write one holds the file's write lock from its first statement."""
        with self._lock:
            try:
                if not self._ready:
                    self._prepare()
                self._db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield self._db
                    self._db.execute("COMMIT")
                finally:
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
            except sqlite3.Error as exc:
                if "readonly" in str(exc):
                    raise StoreReadOnly(
                        f"SQLite store {self.path} is read-only ({exc}): let this user write the "
                        f"file and its directory; will retry"
                    ) from exc
                raise StoreUnavailable(f"SQLite store {self._describe(exc)}; will retry") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _busy(exc: sqlite3.Error) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _path(url: str) -> str:
    """``sqlite:///relative`` or ``sqlite:////absolute``, as SQLAlchemy spells them."""
    scheme, _, rest = url.partition("://")
    location = rest.partition("?")[0]
    fix = "write sqlite:///relative/path or sqlite:////absolute/path"
    if scheme.lower() != "sqlite":
        raise config_error(url, "the scheme is not sqlite", fix)
    if ":memory:" in location or location.startswith("/file:"):
        raise config_error(url, "an in-memory database is private to one process", fix)
    if not location.startswith("/") or location in ("/", "//"):
        raise config_error(url, "it names no file path (or names a host)", fix)
    path = Path(location[1:]).absolute()
    if path.is_dir():
        raise config_error(url, f"{path} is a directory", fix)
    if not path.parent.is_dir():
        raise config_error(url, f"the directory {path.parent} does not exist", "create it")
    return str(path)


# Entries per ``IN (...)`` query: below the 999 bound parameters that older SQLite builds allow.
CHUNK = 500


def chunks(entries: list[str]) -> Iterator[tuple[list[str], str]]:
    """``entries`` in slices that fit one query, each with its ``?, ?, ...`` placeholders."""
    for start in range(0, len(entries), CHUNK):
        chunk = entries[start : start + CHUNK]
        yield chunk, ", ".join("?" * len(chunk))
