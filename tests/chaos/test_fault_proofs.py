"""Proofs of issue 7's defects 1-4 under real faults: real ``celery beat`` processes, a private
redis-server as broker and store, and a TCP fault proxy (tests/support/proxy.py) in front of the
broker or the store. The recorder reads the real broker directly, so it sees exactly what reached
it. Each scenario first checks that its fault really happened, then ends with the harness's
judgement: no slot twice and, with ``catch_up="all"``, none lost; stops answered promptly, the
lease left to another beat.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

import pytest

from tests.chaos.harness import Cluster, token_pid
from tests.support.processes import Process, wait_until
from tests.support.proxy import FaultProxy
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.slow

TTL = 3.0
#: docs/design.md §10 wants a stop answered within 1 s; this much for a loaded machine.
STOP_BOUND = 2.0
#: How long a test waits on a stopped beat before calling it stuck (then it is reaped).
STUCK = STOP_BOUND + 4.0
#: Every beat exits within this after the final SIGTERM of ``finish``.
FINISH_BOUND = 5.0

MakeCluster = Callable[..., Cluster]


@pytest.fixture
def proxy(private_redis: RedisProcess) -> Iterator[FaultProxy]:
    """A fault proxy in front of the test's redis-server; closed with the test."""
    with FaultProxy(private_redis.port) as started:
        yield started


def start(
    cluster: MakeCluster,
    redis: RedisProcess,
    *,
    beats: int,
    broker: str | None = None,
    store: str | None = None,
    schedule: str = "chaos",
    idle_thread: bool = False,
) -> Cluster:
    """Beats whose broker and/or store URL is ``broker``/``store`` (the proxy), while the
    recorder and the test's own store handle talk to the real server."""
    env = {"HASHBEAT_CHAOS_IDLE_THREAD": "1" if idle_thread else "0"}
    if broker is not None:
        env["HASHBEAT_CHAOS_BROKER"] = broker
    if store is not None:
        env["HASHBEAT_CHAOS_STORE"] = store
    return cluster(
        broker_url=redis.url,
        store_url=redis.url,
        prefix="proof",
        queue="proof",
        ttl=TTL,
        catch_up="all",
        schedule=schedule,
        env=env,
    ).start(beats=beats)


def stop_leader(chaos: Cluster, leader: Process) -> float:
    """SIGTERM ``leader``: it must exit 0 within STOP_BOUND and leave the lease; the seconds it
    took (printed, shown with -rP)."""
    since = chaos.note(f"SIGTERM leader {leader.name} pid {leader.pid}")
    leader.terminate()
    code = leader.wait(STUCK)
    took = time.time() - since
    chaos.note(f"{leader.name}: exit code {code} after {took:.2f}s")
    print(f"{leader.name} answered SIGTERM in {took:.2f}s (exit code {code})")
    assert code is not None, f"{leader.name} still running {STUCK:.0f}s after SIGTERM"
    assert code == 0, f"{leader.name} exited {code} on SIGTERM"
    assert took <= STOP_BOUND, f"{leader.name} took {took:.2f}s to answer SIGTERM"
    holder = chaos.leader_token()
    assert holder is None or token_pid(holder) != leader.pid, "the stopped leader kept the lease"
    chaos.gone(leader, replace=False)
    return took


def finish(chaos: Cluster, ambiguous: int = 0) -> None:
    """Let the beats settle, stop them all and judge the record; ``ambiguous`` lost slots are
    allowed (publishes cut short by a stop, where the beat cannot know whether they went out)."""
    chaos.steady()
    time.sleep(2)
    assert all(beat.alive for beat in chaos.beats), "a beat exited on its own over a fault"
    survivors = [beat.name for beat in chaos.beats]
    codes = chaos.stop(timeout=FINISH_BOUND)
    print(chaos.diagnostics(lines=0))
    assert codes == dict.fromkeys(survivors, 0), f"beats did not all exit 0 on SIGTERM: {codes}"
    found = chaos.problems()
    lost_one = [line for line in found if line.startswith("lost: ") and " 1 slot(s) " in line]
    if 0 < len(lost_one) <= ambiguous:
        print(f"allowed as ambiguous: {lost_one}")
        found = [line for line in found if line not in lost_one]
    more = f"\n... and {len(found) - 20} more" if len(found) > 20 else ""
    assert not found, f"{len(found)} problem(s):\n" + "\n".join(found[:20]) + more


def sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))


# Defect 1 ---------------------------------------------------------------------------------------


def test_sigterm_mid_publish_with_another_thread_sends_no_slot_twice(
    cluster: MakeCluster, private_redis: RedisProcess, proxy: FaultProxy
) -> None:
    """Every broker reply takes a second and the app has an idle thread (as Sentry, OpenTelemetry
    and prometheus_client start one), so SIGTERM lands in that thread while the main thread
    waits for a publish's reply. The message is in the broker; the stop must not give its claim
    back for the standby to send again."""
    chaos = start(cluster, private_redis, beats=2, broker=proxy.url(), idle_thread=True)
    leader = chaos.steady()
    chaos.note("broker replies delayed 1 s")
    proxy.delay(1.0)
    # Every second a slot of "every-second" is published; 300 ms into the first such publish.
    sleep_until(math.floor(time.time() + 0.1) + 1.3)
    since = time.time()
    in_flight = [
        d for d in chaos.recorder.deliveries() if d.pid == leader.pid and since - 1 < d.received
    ]
    assert in_flight, "no publish of the leader was waiting for its reply at SIGTERM"
    stop_leader(chaos, leader)
    proxy.pass_through()
    chaos.note("broker replies on time")
    finish(chaos)


# Defect 2 ---------------------------------------------------------------------------------------


def test_broker_refusing_during_a_batch_loses_no_slot_with_catch_up_all(
    cluster: MakeCluster, private_redis: RedisProcess, proxy: FaultProxy
) -> None:
    """Ten entries fall due every second while the broker's port refuses for twice the lease:
    each failed publish costs Celery's retries (about 0.6 s), so a batch outlives the lease unless
    it is cut or renewed, and a give-back without the lease is refused. Every slot must still be
    sent once when the broker is back. One beat: no standby's takeover blurs the outcome."""
    chaos = start(cluster, private_redis, beats=1, broker=proxy.url(), schedule="burst:10")
    chaos.steady()
    down = chaos.note("broker refusing")
    proxy.refuse()
    time.sleep(2 * TTL)
    arrived = [d for d in chaos.recorder.deliveries() if d.received > down + 0.2]
    assert not arrived, f"{len(arrived)} messages reached the broker while it refused"
    assert proxy.stats.refused_resets > 0, "the beats had no broker connection to cut"
    up = chaos.note("broker back")
    proxy.pass_through()
    assert chaos.enqueued_after(up, timeout=15) is not None, "nothing enqueued after the outage"
    finish(chaos)


# Defect 3 ---------------------------------------------------------------------------------------


def test_a_claim_whose_reply_is_lost_is_still_sent(
    cluster: MakeCluster, private_redis: RedisProcess, proxy: FaultProxy
) -> None:
    """The store runs the leader's claim but the reply never arrives (dropped for 1.5 s, past the
    beats' 0.5 s store socket timeout). The fence then holds a slot nobody sent; the leader must
    recognise its own claim when it retries, or the slot is lost even with catch_up="all"."""
    chaos = start(
        cluster, private_redis, beats=2, store=proxy.url("socket_timeout=0.5"), idle_thread=False
    )
    chaos.steady()
    chaos.note("armed: lose the reply to the next request naming every-second")
    # Only a claim (or a give-back, never made in steady state) names an entry in a script call.
    proxy.swallow_reply_to(b"every-second", seconds=1.5)
    assert proxy.wait_triggered(5), "no store request named every-second within 5 s"
    chaos.note("a claim's reply is being dropped")
    request = proxy.stats.trigger_request
    assert request.startswith(b"*") and b"EVALSHA" in request.upper(), (
        f"the request whose reply was dropped is not a script call: {request[:200]!r}"
    )
    time.sleep(2)
    assert proxy.stats.dropped_bytes > 0, "the store's reply to the claim never came to be dropped"
    finish(chaos)


# Defect 4 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["refuse", "hang"])
def test_sigterm_is_answered_while_the_broker_is_down_or_hung(
    cluster: MakeCluster, private_redis: RedisProcess, proxy: FaultProxy, fault: str
) -> None:
    """The broker's port refuses, or accepts and never answers (a frozen server). SIGTERM to the
    leader, then to the standby that took over meanwhile (its first publish opens a connection
    to the dead broker: Celery retries that for minutes), is answered within the bound each
    time, and the lease is left behind. Two fresh beats then finish the run: nothing twice, and
    nothing lost (a publish cut short while its connection is still being made has sent
    nothing, so its claim is given back)."""
    chaos = start(cluster, private_redis, beats=2, broker=proxy.url())
    leader = chaos.steady()
    chaos.note(f"broker: {fault}")
    getattr(proxy, fault)()
    time.sleep(2.5)  # the leader is retrying, or waiting on a publish that never answers
    stop_leader(chaos, leader)
    (standby,) = chaos.beats
    assert wait_until(lambda: chaos.leader_token() is not None, 5), "the standby never took over"
    token = chaos.leader_token()
    assert token is not None and token_pid(token) == standby.pid, "the standby did not lead"
    chaos.note(f"{standby.name} leads while the broker is down")
    time.sleep(2.5)  # it claimed what was due and is trying to publish it
    stop_leader(chaos, standby)
    proxy.pass_through()
    chaos.note("broker back")
    chaos.add_beat()
    chaos.add_beat()
    finish(chaos)


def test_sigterm_is_answered_while_the_store_hangs(
    cluster: MakeCluster, private_redis: RedisProcess, proxy: FaultProxy
) -> None:
    """The store takes requests and never answers: the leader exits within the bound all the
    same (its lease then lapses by itself), and the standby leads once the store answers. The
    hang starts where no slot is due until after the SIGTERM: a claim left hanging at exit may
    still run on the store when it recovers, and its slots are then lost (docs/ha.md), which is
    not this test's subject. (A whole second was not enough: ``plain-1s`` falls due at the
    phase the first beat started with, which was once inside the hang.)"""
    chaos = start(cluster, private_redis, beats=2, store=proxy.url())
    leader = chaos.steady()
    chaos.quiet_moment(before_ms=250, after_ms=50)
    chaos.note("store: hang")
    proxy.hang()
    time.sleep(0.1)
    since = chaos.note(f"SIGTERM leader {leader.name} pid {leader.pid}")
    leader.terminate()
    code = leader.wait(STUCK)
    took = time.time() - since
    print(f"{leader.name} answered SIGTERM in {took:.2f}s with the store hung (exit code {code})")
    assert code == 0 and took <= STOP_BOUND, f"exit code {code} after {took:.2f}s"
    chaos.gone(leader, replace=False)
    proxy.pass_through()
    chaos.note("store answers again")
    finish(chaos)


# A chaos run with a failing broker ---------------------------------------------------------------


def test_chaos_with_a_failing_broker_and_failovers(
    cluster: MakeCluster, private_redis: RedisProcess, proxy: FaultProxy
) -> None:
    """Three beats (idle thread on) publish through a broker that turns slow, refuses and hangs,
    each phase longer than the lease; the leader is stopped with SIGTERM while replies are slow,
    and killed with SIGKILL between ticks (where at-most-once allows no loss). With
    catch_up="all", no slot twice and none lost."""
    chaos = start(cluster, private_redis, beats=3, broker=proxy.url(), idle_thread=True)
    leader = chaos.steady()

    chaos.note("broker slow (0.4 s)")
    proxy.delay(0.4)
    time.sleep(1.5)
    stop_leader(chaos, leader)
    chaos.add_beat()  # a supervisor restarts it
    time.sleep(TTL - 1.5)
    proxy.pass_through()
    chaos.note("broker on time")
    chaos.steady()

    for fault in ("refuse", "hang"):
        chaos.note(f"broker: {fault}")
        getattr(proxy, fault)()
        time.sleep(TTL + 1)
        proxy.pass_through()
        up = chaos.note("broker back")
        assert chaos.enqueued_after(up, timeout=15) is not None, f"nothing enqueued after {fault}"
        chaos.steady()

    victim = chaos.steady()
    chaos.quiet_moment()
    chaos.note(f"SIGKILL leader {victim.name}")
    victim.kill()
    chaos.gone(victim)
    finish(chaos)
