"""Failover on the PostgreSQL store: three ``celery beat`` processes on the session's private
PostgreSQL (a database of the test's own), a Redis broker, the leader killed, frozen past its lease
and stopped, then the database crashed (``pg_ctl stop -m immediate``) and restarted under them.

Judged as every chaos scenario is (``Cluster.problems``, see test_failover.py): nothing enqueued
twice; with ``catch_up="all"`` no slot lost, except those a beat logged as ambiguous.
"""

from __future__ import annotations

import time

import pytest

from tests.chaos.harness import Cluster
from tests.chaos.test_failover import (
    EXIT_BOUND,
    KILL_BOUND,
    STOP_BOUND,
    TTL,
    MakeCluster,
    assert_within,
    finish_after_outage,
    strike,
)
from tests.support.postgres import PostgresServer, wait_answering
from tests.support.processes import Process
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.slow


def test_postgres_leader_faults_then_a_database_crash(
    cluster: MakeCluster,
    private_redis: RedisProcess,
    postgres_server: PostgresServer,
    postgres_url: str,
) -> None:
    chaos: Cluster = cluster(
        broker_url=private_redis.url, store_url=postgres_url, prefix="chaos", queue="chaos", ttl=TTL
    ).start(beats=3)

    victim, since = strike(chaos, "SIGKILL", Process.kill)
    assert_within(chaos.takeover("SIGKILL", victim, since, KILL_BOUND + 10), KILL_BOUND)
    chaos.gone(victim)

    frozen, since = strike(chaos, "SIGSTOP", Process.pause)
    assert_within(chaos.takeover("SIGSTOP", frozen, since, KILL_BOUND + 10), KILL_BOUND)
    time.sleep(max(0.0, since + TTL + 1.5 - time.time()))
    chaos.note(f"SIGCONT {frozen.name}")
    frozen.resume()

    stopped, since = strike(chaos, "SIGTERM", Process.terminate)
    assert_within(chaos.takeover("SIGTERM", stopped, since, STOP_BOUND + 10), STOP_BOUND)
    assert stopped.wait(EXIT_BOUND) == 0, f"{stopped!r} did not exit 0 within {EXIT_BOUND}s"
    chaos.gone(stopped)

    chaos.steady()
    chaos.quiet_moment()
    chaos.note("PostgreSQL stopped -m immediate (a crash)")
    postgres_server.stop("immediate")
    try:
        time.sleep(TTL + 1)
    finally:
        postgres_server.start()
        wait_answering(postgres_server)
    up = chaos.note("PostgreSQL restarted (crash recovery, its data kept)")
    assert chaos.enqueued_after(up, timeout=30) is not None, "no enqueue after PostgreSQL came back"
    assert frozen.alive, "a beat that lost its lease while frozen must stand by, not exit"
    finish_after_outage(chaos, "a database crash")
