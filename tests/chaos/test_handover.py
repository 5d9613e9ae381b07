"""Slots a beat claimed and did not send reach the broker through the leader (docs/design.md §5,
§10), under real faults: real ``celery beat`` processes, a private redis-server as broker and
store, SIGSTOP and a TCP fault proxy in front of the store. With ``catch_up="all"`` the judge
allows no slot lost but those a beat logged as "may or may not have reached the broker".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

import pytest

from tests.chaos.harness import Cluster
from tests.support.proxy import FaultProxy
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.slow

TTL = 3.0
MakeCluster = Callable[..., Cluster]


@pytest.fixture
def proxy(private_redis: RedisProcess) -> Iterator[FaultProxy]:
    with FaultProxy(private_redis.port) as started:
        yield started


def judge(chaos: Cluster) -> None:
    """Let the beats settle, stop them, and find no slot twice and none lost."""
    chaos.steady(timeout=40)
    time.sleep(2)
    assert all(beat.alive for beat in chaos.beats), "a beat exited on its own over a fault"
    survivors = [beat.name for beat in chaos.beats]
    codes = chaos.stop(timeout=10)
    assert codes == dict.fromkeys(survivors, 0), f"beats did not all exit 0 on SIGTERM: {codes}"
    found = chaos.problems()
    more = f"\n... and {len(found) - 20} more" if len(found) > 20 else ""
    assert not found, f"{len(found)} problem(s):\n" + "\n".join(found[:20]) + more


def test_a_leader_frozen_mid_batch_loses_no_claimed_slot(
    cluster: MakeCluster, private_redis: RedisProcess
) -> None:
    """1,500 entries fall due at once every 5 s; the leader is frozen (SIGSTOP) 15 ms into a
    wave, for longer than its lease. The standby takes over and moves past the slots the frozen
    leader claimed; the frozen leader wakes with claims it did not send and no lease to give
    them back under. It must hand them over, and the new leader send them."""
    chaos = cluster(
        broker_url=private_redis.url,
        store_url=private_redis.url,
        prefix="frozen",
        queue="frozen",
        ttl=TTL,
        catch_up="all",
        schedule="wave:1500",
    ).start(beats=2)
    leader = chaos.steady(timeout=40)
    wave = 5 * math.ceil((time.time() + 1) / 5)
    time.sleep(max(0.0, wave + 0.015 - time.time()))
    leader.pause()
    chaos.note(f"SIGSTOP leader {leader.name} 15 ms into the wave at {wave}")
    time.sleep(TTL + 2)
    leader.resume()
    chaos.note(f"SIGCONT {leader.name}")
    holder = chaos.leader_token()
    assert holder is not None and str(leader.pid) not in holder.split(":")[1:2], (
        "the standby did not take over while the leader was frozen"
    )
    judge(chaos)


def test_a_lost_claim_reply_then_a_failover_delays_the_slot(
    cluster: MakeCluster, private_redis: RedisProcess, proxy: FaultProxy
) -> None:
    """The leader's claim runs in the store but its reply is lost, and the leader is then cut
    off from the store past its lease: the standby takes over and sees the claimed fence. The
    cut-off beat, back, hands the slot over and the new leader sends it (docs/ha.md)."""
    chaos = cluster(
        broker_url=private_redis.url,
        store_url=private_redis.url,
        prefix="lost",
        queue="lost",
        ttl=TTL,
        catch_up="all",
        env={"HASHBEAT_CHAOS_STORE": proxy.url("socket_timeout=0.5")},
    ).start(beats=1)
    cut_off = chaos.steady()
    chaos.env["HASHBEAT_CHAOS_STORE"] = private_redis.url
    chaos.add_beat()
    time.sleep(2)
    proxy.swallow_reply_to(b"every-second", seconds=1.0)
    assert proxy.wait_triggered(5), "no store request named every-second within 5 s"
    time.sleep(0.3)  # the request reaches the store; the beat waits 0.5 s for its reply
    proxy.refuse()
    chaos.note(f"the claim's reply lost, then {cut_off.name} cut off from the store")
    time.sleep(TTL + 2)
    log = cut_off.log.read_text()
    assert "was not confirmed" in log, "the lost reply was not a claim's: the fault missed"
    holder = chaos.leader_token()
    assert holder is not None and f":{cut_off.pid}:" not in holder, "no failover happened"
    proxy.pass_through()
    chaos.note("the store answers again")
    time.sleep(3)
    judge(chaos)
