"""The PostgreSQL store behind PgBouncer in transaction pooling (docs/ha.md).

Two beats' stores share PgBouncer's one server connection, so each transaction may run on a
connection another client used a moment before: the store must keep no session state (no session
advisory lock, no LISTEN, no prepared statement, no SET outside a transaction).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from celery_hashbeat.store import open_store
from celery_hashbeat.store.controls import DEFINITION
from celery_hashbeat.store.values import RunGuard
from tests.support.postgres import PgBouncer, PostgresServer, pgbouncer_binary


@pytest.fixture
def bouncer(postgres_server: PostgresServer) -> Iterator[PgBouncer]:
    binary = pgbouncer_binary()
    if binary is None:
        pytest.skip("no pgbouncer installed: apt-get install pgbouncer (as .ci/run does)")
    bouncer = PgBouncer(postgres_server, binary)
    yield bouncer
    bouncer.close()


def test_two_beats_keep_the_protocol_through_one_pooled_connection(
    postgres_server: PostgresServer, postgres_url: str, bouncer: PgBouncer
) -> None:
    database = postgres_url.rpartition("/")[2]
    leader = open_store(bouncer.url(database), "p")
    standby = open_store(bouncer.url(database), "p")
    try:
        assert leader.acquire("a", 60_000)
        assert not standby.acquire("b", 60_000)
        guard = {"e": RunGuard("skip", "task-1", 60_000)}
        assert leader.claim("a", {"e": (1000, "f"), "g": (1000, "f")}, guard) == {"e", "g"}
        assert standby.claim("b", {"e": (2000, "f")}) == set()
        assert standby.running() == {"e": "task-1"}
        assert leader.unclaim("a", {"g": 1000}) == {"g"}
        assert leader.hand_over("a", [("e", 1000)]) == {("e", 1000)}
        assert standby.changes(0).handed == 1
        assert leader.take_handed("a") == [("e", 1000)]
        assert standby.edit("x", {DEFINITION: "d"}) is not None
        assert leader.changes(0).records == {"x": ("d", None)}
        standby.ask("t1")
        assert leader.take_triggers("a") == ["t1"]
        leader.record([("e", "sent")])
        assert standby.history("e") == ["sent"]
        assert leader.release("a")
        assert standby.acquire("b", 60_000)
        # Both stores are connected, yet the server saw one connection of the role: pooled.
        sessions = postgres_server.query(
            database,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND usename = 'hashbeat'",
            database,
        )
        assert sessions == [(1,)]
    finally:
        leader.close()
        standby.close()
