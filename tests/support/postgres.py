"""A private PostgreSQL for the suite: ``initdb`` and ``pg_ctl`` in a temporary directory.

The suite never uses a PostgreSQL the machine already runs (nor its port 5432): it starts its own
server once per test session on a free port, from the binaries on ``$PATH`` or in the usual
install folders (Debian keeps them in ``/usr/lib/postgresql/<version>/bin``). PostgreSQL refuses to
run as root, so when the tests run as root the server runs as the unprivileged user ``nobody``
(made with ``useradd`` where the machine has none).
Tests connect as a password-authenticated role (scram-sha-256) that owns a database of each
test's own; the superuser is used only to make roles and databases. Where no PostgreSQL is
installed, the tests that need one are skipped with the reason (``.ci/run`` installs one).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.redis_server import free_port

#: The role the stores under test log in as, and its password.
ROLE = "hashbeat"
PASSWORD = "s3cret-pw"
SUPERUSER = "postgres"
SUPERPASSWORD = "super-pw"


def postgres_bin() -> Path | None:
    """The folder of ``initdb``/``pg_ctl``: $PATH first, then the newest Debian-style install."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0,
    )
    return versions[-1].parent if versions else None


def missing_reason() -> str | None:
    """Why no private PostgreSQL can run here, or None."""
    try:
        import psycopg  # noqa: F401, PLC0415
    except ImportError:
        return "psycopg 3 is not installed: pip install -e '.[test]'"
    if postgres_bin() is None:
        return (
            "no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql: "
            "apt-get install postgresql (as .ci/run does)"
        )
    return None


def unprivileged_user() -> str:
    """``nobody``, made if missing, for the servers that refuse to run as root."""
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "nobody"], check=True, capture_output=True
        )
    return "nobody"


class PostgresServer:
    """A PostgreSQL server of the suite's own; ``stop`` and ``start`` let a test kill and restart
    it under the store (its data stays)."""

    def __init__(self) -> None:
        bin_dir = postgres_bin()
        assert bin_dir is not None, missing_reason()
        self._bin = bin_dir
        self.port = free_port()
        self.host = "127.0.0.1"
        self.root = Path(tempfile.mkdtemp(prefix="hashbeat-pg-"))
        self.data = self.root / "data"
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = unprivileged_user()
            entry = pwd.getpwnam(self._user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        pwfile = self.root / "pw"
        pwfile.write_text(SUPERPASSWORD + "\n")
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(pwfile, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--no-sync",
        )
        conf = self.data / "postgresql.conf"
        with conf.open("a") as out:
            out.write(
                f"port = {self.port}\nlisten_addresses = '{self.host}'\n"
                f"unix_socket_directories = '{self.root}'\n"
                # A test server: no fsync (the OS does not crash under it; a killed server's
                # writes are in the page cache), few resources.
                "fsync = off\nfull_page_writes = off\nshared_buffers = 32MB\n"
                "max_connections = 200\n"
            )
        self.start()
        self.admin(
            f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'",
        )

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [str(self._bin / tool), *args],
            check=True,
            capture_output=True,
            user=self._user,
            cwd=self.root,
        )

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server; ``immediate`` is a crash (no shutdown checkpoint; recovery on start)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def url(self, database: str, user: str = ROLE, password: str = PASSWORD) -> str:
        return f"postgresql://{user}:{password}@{self.host}:{self.port}/{database}"

    def admin(self, *statements: str, database: str = "postgres") -> None:
        """Run statements as the superuser, each in its own transaction."""
        import psycopg  # noqa: PLC0415

        url = self.url(database, SUPERUSER, SUPERPASSWORD)
        with psycopg.connect(url, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    def query(self, database: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """Rows of one statement, as the superuser (to look behind the store's back)."""
        import psycopg  # noqa: PLC0415

        with psycopg.connect(self.url(database, SUPERUSER, SUPERPASSWORD), autocommit=True) as c:
            cursor = c.execute(statement, params or None)  # type: ignore[arg-type]
            return list(cursor.fetchall()) if cursor.description else []

    def create_database(self, owner: str = ROLE) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        # FILE_COPY: a checkpoint (cheap without fsync) instead of copying the template into WAL.
        self.admin(f"CREATE DATABASE {name} OWNER {owner} STRATEGY FILE_COPY")
        return name

    def drop_database(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def wait_answering(server: PostgresServer, timeout_s: float = 10.0) -> None:
    """Until the server accepts the superuser (after a restart)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            server.admin("SELECT 1")
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's private PostgreSQL, or a skip that says why there is none."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A URL to a database of this test's own on the session's PostgreSQL, dropped afterwards."""
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)


def pgbouncer_binary() -> str | None:
    return shutil.which("pgbouncer") or next(
        (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if Path(path).exists()),
        None,
    )


class PgBouncer:
    """A PgBouncer of the test's own in front of ``server``, in transaction pooling with one
    server connection per database and user: every client's transactions share it, as a busy
    production pool would, so a store that kept any session state would be found out."""

    def __init__(self, server: PostgresServer, binary: str) -> None:
        self.server = server
        self.port = free_port()
        root = server.root / f"pgbouncer-{self.port}"
        root.mkdir()
        (root / "users.txt").write_text(f'"{ROLE}" "{PASSWORD}"\n')
        config = root / "pgbouncer.ini"
        config.write_text(
            f"[databases]\n* = host={server.host} port={server.port}\n"
            f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            f"unix_socket_dir =\nauth_type = scram-sha-256\nauth_file = {root / 'users.txt'}\n"
            "pool_mode = transaction\ndefault_pool_size = 1\nmax_client_conn = 50\n"
            f"logfile = {root / 'pgbouncer.log'}\n"
        )
        if os.geteuid() == 0:
            entry = pwd.getpwnam(unprivileged_user())
            for path in (root, root / "users.txt", config):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._process = subprocess.Popen(
            [binary, str(config)],
            user=unprivileged_user() if os.geteuid() == 0 else None,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.log = root / "pgbouncer.log"
        deadline = time.monotonic() + 10
        while "process up" not in (self.log.read_text() if self.log.exists() else ""):
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"pgbouncer did not start: {self.log.read_text()}")
            time.sleep(0.05)

    def url(self, database: str) -> str:
        return f"postgresql://{ROLE}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def close(self) -> None:
        self._process.terminate()
        self._process.wait(10)
