"""Failover under real faults: three ``celery beat`` processes, one store, one Redis broker.

Every scenario ends with the same judgement (``Cluster.problems``): no (entry, slot) enqueued
twice, every task id uuid5(entry|slot), every slot one of its entry's slots, every fence left in
the store really enqueued, every entry still enqueueing at the end and, with ``catch_up="all"``,
no slot missing between an entry's first and last recorded one (per store lifetime). Takeover
times are asserted against the design's bars with generous slack; the precise numbers are
``benchmarks/failover.py``'s job.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.chaos.harness import Cluster, Takeover
from tests.support.postgres import PostgresServer, wait_answering
from tests.support.processes import Process
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.slow

#: The lease, short so that each failover takes seconds.
TTL = 3.0
#: docs/design.md §7: after SIGKILL a standby enqueues within TTL + 1 s, after a clean stop
#: within 1 s. The tests allow this much more, for a loaded machine.
SLACK = 3.0
KILL_BOUND = TTL + 1 + SLACK
STOP_BOUND = 1 + SLACK
#: A beat must answer SIGTERM promptly (docs/design.md §5).
EXIT_BOUND = 5.0

MakeCluster = Callable[..., Cluster]


@pytest.fixture(params=["redis", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path, private_redis: RedisProcess) -> str:
    """The Redis store (the broker's server), a SQLite file the beats share on this host, or a
    database of the test's own on the session's private PostgreSQL."""
    if request.param == "redis":
        return private_redis.url
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    return f"sqlite:///{tmp_path}/store.sqlite"


def start(cluster: MakeCluster, broker: RedisProcess, store_url: str) -> Cluster:
    return cluster(
        broker_url=broker.url, store_url=store_url, prefix="chaos", queue="chaos", ttl=TTL
    ).start(beats=3)


def strike(chaos: Cluster, fault: str, act: Callable[[Process], None]) -> tuple[Process, float]:
    """Wait for a steady leader and a moment between ticks, then do ``act`` to the leader."""
    leader = chaos.steady()
    chaos.quiet_moment()
    since = chaos.note(f"{fault} leader {leader.name} pid {leader.pid}")
    act(leader)
    return leader, since


def assert_within(takeover: Takeover, bound: float) -> None:
    assert takeover.enqueue is not None, f"no other beat enqueued after {takeover.fault}"
    assert takeover.lease is not None, (
        f"the store never named another leader after {takeover.fault}"
    )
    assert takeover.enqueue <= bound, (
        f"after {takeover.fault} of the leader, another beat enqueued only after "
        f"{takeover.enqueue:.2f}s (bound {bound:.1f}s)"
    )


def assert_clean_finish(chaos: Cluster) -> None:
    """Stop every beat; each exits 0 promptly, and the record breaks no rule."""
    survivors = [beat.name for beat in chaos.beats]
    codes = chaos.stop(timeout=EXIT_BOUND)
    print(chaos.diagnostics(lines=0))  # the timeline, takeover times included: shown with -rP
    assert codes == dict.fromkeys(survivors, 0), f"beats did not all exit 0 on SIGTERM: {codes}"
    found = chaos.problems()
    more = f"\n... and {len(found) - 20} more" if len(found) > 20 else ""
    assert not found, f"{len(found)} problem(s):\n" + "\n".join(found[:20]) + more


def test_leader_faults_then_a_store_outage(
    request: pytest.FixtureRequest,
    cluster: MakeCluster,
    private_redis: RedisProcess,
    store_url: str,
) -> None:
    """SIGKILL the leader three times, freeze one past its lease, SIGTERM one; a supervisor
    replaces the dead. Each time a standby takes over in time, and nothing is enqueued twice or
    lost, not even by the frozen leader when it wakes. Then the same beats live through an
    outage of their store (``redis_restart_and_pause`` on Redis, ``sqlite_store_locked`` on
    SQLite, ``postgres_crash_and_restart`` on PostgreSQL): every beat, the once-frozen one too,
    keeps running and the record stays clean.

    (One run per store proves what test_leader_faults and test_redis_restart_and_pause /
    test_sqlite_store_locked proved apart: they started the same three beats on the same store.)
    """
    chaos = start(cluster, private_redis, store_url)

    for _ in range(3):
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

    if store_url == private_redis.url:
        redis_restart_and_pause(chaos, private_redis)
        outage = "a store outage"
    elif store_url.startswith("postgresql://"):
        postgres_crash_and_restart(chaos, request.getfixturevalue("postgres_server"))
        outage = "a database crash"
    else:
        sqlite_store_locked(chaos, Path(store_url.removeprefix("sqlite:///")))
        outage = "a locked store"
    assert frozen.alive, "a beat that lost its lease while frozen must stand by, not exit"
    finish_after_outage(chaos, outage)


def redis_restart_and_pause(chaos: Cluster, server: RedisProcess) -> None:
    """The Redis that is both store and broker dies and comes back empty, then hangs for longer
    than the lease. The beats keep running, resume enqueueing on their own, and never enqueue a
    slot twice; across the hang (the store kept its memory) no slot is lost."""
    chaos.steady()
    chaos.quiet_moment()
    down = chaos.note("redis-server SIGKILL")
    server.kill()
    chaos.wipes.append(down)  # no persistence: the restarted server remembers nothing
    time.sleep(2)
    server.start()
    up = chaos.note("redis-server restarted, empty")
    assert chaos.enqueued_after(up, timeout=30) is not None, "no enqueue after Redis came back"

    chaos.steady()
    chaos.quiet_moment()
    chaos.note("redis-server SIGSTOP")
    server.pause()
    time.sleep(TTL + 1.5)
    server.resume()
    up = chaos.note("redis-server SIGCONT")
    assert chaos.enqueued_after(up, timeout=30) is not None, "no enqueue after Redis woke up"


def sqlite_store_locked(chaos: Cluster, path: Path) -> None:
    """Another process holds the SQLite store's write lock for longer than the lease (a backup,
    a stuck tool). The beats stand by, take over again once it is free, and catch up every
    missed slot exactly once."""
    chaos.steady()
    chaos.quiet_moment()
    locker = sqlite3.connect(path, timeout=10, isolation_level=None)
    try:
        locker.execute("BEGIN EXCLUSIVE")
        chaos.note("store write-locked by another process")
        time.sleep(TTL + 1.5)
        locker.execute("ROLLBACK")
    finally:
        locker.close()
    free = chaos.note("store lock released")
    assert chaos.enqueued_after(free, timeout=30) is not None, "no enqueue after the lock was freed"


def postgres_crash_and_restart(chaos: Cluster, server: PostgresServer) -> None:
    """PostgreSQL crashes (``pg_ctl stop -m immediate``: no shutdown checkpoint) and restarts
    after longer than the lease, recovering its committed data. The beats stand by meanwhile,
    reconnect, take over again and catch up every missed slot exactly once."""
    chaos.steady()
    chaos.quiet_moment()
    chaos.note("PostgreSQL stopped -m immediate (a crash)")
    server.stop("immediate")
    try:
        time.sleep(TTL + 1)
    finally:
        server.start()
        wait_answering(server)
    up = chaos.note("PostgreSQL restarted (crash recovery, its data kept)")
    assert chaos.enqueued_after(up, timeout=30) is not None, "no enqueue after PostgreSQL came back"


def finish_after_outage(chaos: Cluster, outage: str) -> None:
    """Every beat lived through the outage, and the record is clean once they settle."""
    chaos.steady()
    time.sleep(2)
    assert all(beat.alive for beat in chaos.beats), f"a beat exited over {outage}"
    assert_clean_finish(chaos)


def test_sigterm_during_a_burst_loses_nothing(
    cluster: MakeCluster, private_redis: RedisProcess
) -> None:
    """SIGTERM reaches the leader while it publishes a burst (300 entries due at one instant).
    A clean stop must not strand what it claimed: the standby enqueues every slot, once.

    Celery's SIGTERM handler raises SystemExit wherever the main thread is, here between the
    batch's claim and the end of its publishing; whatever was claimed and not yet sent must be
    given back (or sent) before the beat exits, or the fence hides it from the standby's catch-up.
    """
    chaos = cluster(
        broker_url=private_redis.url,
        store_url=private_redis.url,
        prefix="chaos",
        queue="chaos",
        ttl=TTL,
        schedule="burst:300",
    ).start(beats=2)

    leader = chaos.steady()
    time.sleep(1.02 - time.time() % 1)  # 20 ms after a whole second: mid-burst
    since = chaos.note(f"SIGTERM leader {leader.name} pid {leader.pid} mid-burst")
    leader.terminate()
    assert_within(chaos.takeover("SIGTERM", leader, since, STOP_BOUND + 10), STOP_BOUND)
    assert leader.wait(EXIT_BOUND) == 0, f"{leader!r} did not exit 0 within {EXIT_BOUND}s"
    chaos.gone(leader)

    chaos.steady()
    time.sleep(1)
    assert_clean_finish(chaos)
