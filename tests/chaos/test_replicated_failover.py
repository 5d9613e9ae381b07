"""Three ``celery beat`` processes on a replicated store, Sentinel or Redis Cluster, whose master
is killed under them: a replica takes over and the beats carry on, with no slot sent twice and,
with ``catch_up="all"``, none lost (the judgement every chaos scenario ends with)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.chaos.harness import Cluster
from tests.chaos.test_failover import TTL, assert_clean_finish
from tests.support.redis_server import RedisProcess
from tests.support.redis_topologies import ClusterSetup, SentinelSetup, Server, in_sync, wait_for

pytestmark = pytest.mark.slow

PREFIX = "chaos"

MakeCluster = Callable[..., Cluster]


def kill_the_master(
    chaos: Cluster, master: Server, replica: Server, promoted: Callable[[], bool]
) -> None:
    """Wait for a steady leader, a moment between ticks and a replica that has every write (a
    claim the replica never got is min_replicas' test, tests/store/test_replicated.py); SIGKILL
    the master; the beats must send again after the replica's promotion."""
    chaos.steady()
    chaos.quiet_moment()
    wait_for(lambda: in_sync(master, replica), 5, "the replica catching up")
    since = chaos.note(f"SIGKILL the master holding the keys, port {master.port}")
    master.kill()
    wait_for(promoted, 20, "the replica's promotion")
    chaos.note(f"the replica on port {replica.port} is the master")
    assert chaos.enqueued_after(since, 20) is not None, "no beat sent anything after the failover"
    chaos.steady()
    time.sleep(1)
    assert_clean_finish(chaos)


def test_sentinel_master_killed_under_three_beats(
    cluster: MakeCluster, private_redis: RedisProcess
) -> None:
    with SentinelSetup() as setup:
        chaos = cluster(
            broker_url=private_redis.url,
            store_url=setup.url(),
            prefix=PREFIX,
            queue="chaos",
            ttl=TTL,
            schedule="failover",
        ).start(beats=3)

        def promoted() -> bool:
            return setup.master_port() == setup.replica.port

        kill_the_master(chaos, setup.master, setup.replica, promoted)


def test_cluster_master_killed_under_three_beats(
    cluster: MakeCluster, private_redis: RedisProcess
) -> None:
    with ClusterSetup("{" + PREFIX + "}:leader") as setup:
        chaos = cluster(
            broker_url=private_redis.url,
            store_url=setup.url(),
            prefix=PREFIX,
            queue="chaos",
            ttl=TTL,
            schedule="failover",
        ).start(beats=3)
        kill_the_master(chaos, setup.holder, setup.replica, setup.promoted)


def test_min_replicas_holds_back_every_slot_while_the_replica_is_frozen(
    cluster: MakeCluster, private_redis: RedisProcess
) -> None:
    """With hashbeat_store_min_replicas = 1 and the only replica frozen, no claim is confirmed,
    so nothing is sent (a quarter-second entry falls due all along); once it thaws, every slot
    owed goes out once (catch_up="all"). The store answers all along, so the leader keeps its
    lease and says so in one line when the replicas fall behind and one when they catch up,
    not once per retry."""
    with SentinelSetup() as setup:
        chaos = cluster(
            broker_url=private_redis.url,
            store_url=setup.url("min_replicas=1&min_replicas_timeout=0.3"),
            prefix=PREFIX,
            queue="chaos",
            ttl=TTL,
            schedule="failover",
        ).start(beats=3)
        leader = chaos.steady()
        chaos.quiet_moment()
        logged = {beat.name: len(beat.log.read_text()) for beat in chaos.beats}
        since = chaos.note(f"SIGSTOP the replica, port {setup.replica.port}")
        setup.replica.pause()
        time.sleep(6)
        until = chaos.note("SIGCONT the replica")
        setup.replica.resume()
        held = [d for d in chaos.recorder.deliveries() if since + 0.5 < d.received < until]
        assert not held, f"sent while no replica could hold the claims: {held}"
        assert chaos.enqueued_after(until, 10) is not None, "nothing sent once the replica thawed"
        assert chaos.steady() is leader, "the leader changed although the store answered"
        for beat in chaos.beats:
            said = [
                line
                for line in beat.log.read_text()[logged[beat.name] :].splitlines()
                if "Sending due task" not in line
            ]
            assert len(said) <= 2, f"{beat.name} said more than two lines:\n" + "\n".join(said)
        assert_clean_finish(chaos)
