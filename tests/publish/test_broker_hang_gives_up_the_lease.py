"""A broker that accepts connections and never answers (blackholed) must not hold a leader
forever (issue 22, defect 3; docs/design.md §10): real ``celery beat`` processes whose broker is
a TCP proxy in front of a real redis-server, the proxy switched to hang mode for a while.

Every wait on the broker, the connect and the channel's set-up included, is bounded by
max(lease TTL, 5 s); a leader that cannot publish within it gives back what it claimed, gives up
the lease, says so on /livez, and leads again once its broker answers. When the blackhole ends,
messages flow again within a bound, and no slot went out twice or, with ``catch_up="all"``, was
lost beyond those logged as perhaps sent.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.harness import Cluster, token_pid
from tests.support.processes import Process, ProcessGroup, wait_until
from tests.support.proxy import FaultProxy
from tests.support.redis_server import RedisProcess, free_port

pytestmark = pytest.mark.slow

TTL = 3.0
#: The longest a publish may wait on the broker: max(TTL, 5 s).
PUBLISH_BOUND_S = 5.0
HANG_S = 14.0
#: After the blackhole ends, messages must reach the broker again within this.
RESUME_S = 15.0


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path) as group:
        yield group


@pytest.fixture
def proxy(private_redis: RedisProcess) -> Iterator[FaultProxy]:
    with FaultProxy(private_redis.port) as started:
        yield started


def livez(port: int) -> int | None:
    """The status /livez answers on ``port``, or None if it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/livez", timeout=2) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def test_a_blackholed_broker_makes_the_leader_give_up_and_sends_resume_after_it(
    private_redis: RedisProcess, proxy: FaultProxy, processes: ProcessGroup
) -> None:
    chaos = Cluster(
        processes,
        broker_url=private_redis.url,
        store_url=private_redis.url,
        prefix="blackhole",
        queue="blackhole",
        ttl=TTL,
        env={"HASHBEAT_CHAOS_BROKER": proxy.url()},
    )
    try:
        chaos.recorder.start()
        ports: dict[str, int] = {}
        for _ in range(2):
            port = free_port()
            chaos.env["HASHBEAT_CHAOS_HTTP_PORT"] = str(port)
            ports[chaos.add_beat().name] = port
        leader = chaos.steady()
        leader_port = ports[leader.name]
        assert livez(leader_port) == 200, chaos.diagnostics()

        began = chaos.note("broker blackholed")
        proxy.hang()

        # The leader gives the lease up once a publish has waited out its bound, and /livez
        # says its broker path is stuck.
        def held_by_leader() -> bool:
            token = chaos.leader_token()
            return token is not None and token_pid(token) == leader.pid

        let_go = wait_until(lambda: not held_by_leader(), PUBLISH_BOUND_S + 5, interval=0.05)
        let_go_s = time.time() - began
        chaos.note(f"the stuck leader let the lease go: {let_go} after {let_go_s:.1f}s")
        assert let_go, f"the stuck leader kept the lease {let_go_s:.1f}s\n{chaos.diagnostics()}"
        stuck = wait_until(lambda: livez(leader_port) == 503, 5, interval=0.2)
        assert stuck, f"/livez of the stuck leader still says 200\n{chaos.diagnostics()}"
        time.sleep(max(0.0, began + HANG_S - time.time()))
        # It never took the lease back while its broker stayed blackholed.
        assert not held_by_leader(), chaos.diagnostics()

        ended = chaos.note("broker answers again")
        proxy.pass_through()
        resumed = chaos.enqueued_after(ended, RESUME_S)
        chaos.note(f"first message after the blackhole: {resumed}")
        assert resumed is not None, f"nothing sent {RESUME_S}s after\n{chaos.diagnostics()}"
        assert wait_until(lambda: all(livez(p) == 200 for p in ports.values()), 10), (
            chaos.diagnostics()
        )

        chaos.steady()
        time.sleep(2)
        beats: list[Process] = list(chaos.beats)
        codes = chaos.stop()
        assert codes == {beat.name: 0 for beat in beats}, chaos.diagnostics()
        found = chaos.problems()
        assert not found, "\n".join(found[:20]) + "\n" + chaos.diagnostics()
    finally:
        chaos.close()
