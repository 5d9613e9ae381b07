"""``hashbeat status`` on the PostgreSQL store: it reads the lease and the beats, and a refused
login, an unknown database or a missing privilege is one line (password hidden) and exit STORE."""

from __future__ import annotations

from click.testing import CliRunner

from celery_hashbeat.cli import main
from celery_hashbeat.cli.output import Exit
from celery_hashbeat.store import open_store
from tests.support.postgres import PASSWORD, PostgresServer


def test_status_reads_the_leader_from_postgresql(postgres_url: str) -> None:
    store = open_store(postgres_url, "p")
    assert store.acquire("host:1:beat", 10_000)
    store.heartbeat("host:1:beat", "leader", 10_000)
    result = CliRunner().invoke(
        main, ["status", "--store", postgres_url, "--prefix", "p", "--check"]
    )
    store.close()
    assert result.exit_code == 0, result.output
    assert "host:1:beat" in result.stdout
    assert PASSWORD not in result.output


def test_refusals_are_one_line_without_the_password(
    postgres_server: PostgresServer, postgres_url: str
) -> None:
    database = postgres_url.rpartition("/")[2]
    postgres_server.admin("CREATE ROLE reader LOGIN PASSWORD 'reader-pw'")
    try:
        cases = {
            postgres_url.replace(PASSWORD, "wrong-pw-7"): "password authentication failed",
            postgres_server.url("no_such_db"): 'database "no_such_db" does not exist',
            postgres_server.url(database, "reader", "reader-pw"): "the role lacks a privilege",
        }
        for url, message in cases.items():
            result = CliRunner().invoke(main, ["status", "--store", url, "--prefix", "p"])
            assert result.exit_code == Exit.STORE, result.output
            assert message in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert "Traceback" not in result.output
            assert "wrong-pw-7" not in result.output and "reader-pw" not in result.output
    finally:
        postgres_server.admin("DROP ROLE reader")
