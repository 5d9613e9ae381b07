"""A backfill an operator asked for survives the leader that was sending it (docs/design.md
§19): real ``celery beat`` processes, a private redis-server as broker and store, a TCP fault
proxy in front of the leader's store, and SIGKILL.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

import pytest
from celery import Celery

from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.store.redis.scripts.controls import TAKE_TRIGGERS_SCRIPT
from tests.chaos.app import DENSE, schedule_for
from tests.chaos.harness import Cluster, backfill_problems
from tests.support.processes import wait_until
from tests.support.proxy import FaultProxy
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.slow

TTL = 3.0
PREFIX = "killed-mid-backfill"
#: What a take of the queue sends the store (EVALSHA of its script, loaded by then).
TAKE_SHA = hashlib.sha1(TAKE_TRIGGERS_SCRIPT.encode()).hexdigest().encode()


@pytest.fixture
def proxy(private_redis: RedisProcess) -> Iterator[FaultProxy]:
    with FaultProxy(private_redis.port) as started:
        yield started


def operator(redis_url: str) -> ScheduleAdmin:
    """An operator's ScheduleAdmin on the beats' store, configured as the chaos app is."""
    app = Celery("backfill-operator", broker=redis_url, set_as_current=False)
    app.conf.update(
        beat_schedule=schedule_for("long-backfill"),
        hashbeat_store_url=redis_url,
        hashbeat_key_prefix=PREFIX,
        task_default_queue=PREFIX,
    )
    return ScheduleAdmin(app)


def test_a_leader_killed_between_the_take_and_the_put_back_loses_no_backfilled_slot(
    cluster: Callable[..., Cluster], private_redis: RedisProcess, proxy: FaultProxy
) -> None:
    """A backfill of 2,000 slots takes the leader two turns of 1,000. The leader sends the
    first, puts the rest back, takes it again and is killed (SIGKILL) before it claims a slot
    of its second turn: its store's reply to the take is held back, so the kill lands between
    the take and the put-back. The standby takes over, its take recovers the request, and it
    sends every slot the first turn did not, each once."""
    admin = operator(private_redis.url)
    try:
        admin.pause(DENSE, reason="only the backfill sends it")
        chaos = cluster(
            broker_url=private_redis.url,
            store_url=private_redis.url,
            prefix=PREFIX,
            queue=PREFIX,
            ttl=TTL,
            schedule="long-backfill",
            env={"HASHBEAT_CHAOS_STORE": proxy.url("socket_timeout=0.5")},
        )
        chaos.schedule.pop(DENSE)  # judged apart: only the backfill sends it
        chaos.start(beats=1)
        leader = chaos.steady()
        chaos.env["HASHBEAT_CHAOS_STORE"] = private_redis.url
        chaos.add_beat()
        start = datetime.now(timezone.utc)
        time.sleep(10)
        done = admin.backfill(DENSE, start, datetime.now(timezone.utc))
        asked = set(done.slots)
        assert len(asked) >= 1_500, f"only {len(asked)} slots to backfill: not two turns"
        chaos.note(f"asked a backfill of {len(asked)} slots of {DENSE}")

        def backfilled() -> int:
            return sum(1 for d in chaos.recorder.deliveries() if d.entry == DENSE)

        assert wait_until(backfilled, 10), "the leader sent no slot of the backfill"
        # The first turn's take is done; the next take's reply is held back from the leader.
        proxy.swallow_reply_to(TAKE_SHA, seconds=5.0)
        assert proxy.wait_triggered(10), "the leader did not take the rest of the backfill"
        time.sleep(0.1)  # the take reaches the store; the leader waits 0.5 s for its reply
        leader.kill()
        first = backfilled()
        chaos.note(f"SIGKILL {leader.name} after its take, with {first} slot(s) sent")
        chaos.gone(leader, replace=False)
        assert 0 < first < len(asked), f"{first} of {len(asked)} sent: not mid-backfill"
        wait_until(lambda: backfilled() >= len(asked), 20)
        chaos.stop()
        found = backfill_problems(chaos.recorder.deliveries(), {DENSE: asked}, chaos.ambiguous())
        assert not found, "\n".join(found[:20])
        sent_by = {d.pid for d in chaos.recorder.deliveries() if d.entry == DENSE}
        assert len(sent_by) == 2, f"the backfill was not sent by both beats: {sent_by}"
    finally:
        admin.close()
