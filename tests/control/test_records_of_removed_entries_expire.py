"""What the store keeps of an entry that is gone (removed by an operator, or the copy of a worker
that left) gets a bounded life once the leader forgets it; what still runs keeps its records and
goes on (docs/operations.md, "What the store keeps, and for how long"). An in-process beat on the
real Redis store; the TTLs are read from Redis itself."""

from __future__ import annotations

import time

import redis
from celery import Celery

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.store import retention
from tests.control.fixtures import POLL_S
from tests.support.beat_fixtures import Broker, Clock, Make, drain

EVERY_SECOND = hashcron("* * * * * *")


def seconds(clock: Clock, beat: Scheduler, count: int) -> None:
    for _ in range(count):
        clock.advance(1)
        time.sleep(POLL_S * 1.5)
        drain(beat)


def test_a_removed_entry_and_a_departed_workers_copy_leave_records_that_expire(
    admin: ScheduleAdmin,
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    key_prefix: str,
) -> None:
    app.conf.worker_direct = True
    stay, leave = f"celery@{key_prefix}-1", f"celery@{key_prefix}-2"
    admin.add("live", task="shop.report", schedule=EVERY_SECOND)
    admin.add("gone", task="shop.report", schedule=EVERY_SECOND)
    admin.add("copies", task="shop.report", schedule=EVERY_SECOND, workers=[stay, leave])
    beat = schedulers(clock)
    seconds(clock, beat, 3)
    client = redis.Redis.from_url(app.conf.hashbeat_store_url)

    def ttl_ms(entry: str) -> int:
        return int(client.pttl(f"{{{key_prefix}}}:history:{entry}"))

    try:
        kept = ["live", "gone", f"copies@{stay}", f"copies@{leave}"]
        assert all(ttl_ms(entry) > retention.GONE_TTL_MS for entry in kept), [
            ttl_ms(entry) for entry in kept
        ]
        admin.remove("gone")
        admin.update("copies", workers=[stay])  # the other worker left
        seconds(clock, beat, 2)
        assert 0 < ttl_ms("gone") <= retention.GONE_TTL_MS
        assert 0 < ttl_ms(f"copies@{leave}") <= retention.GONE_TTL_MS
        assert retention.GONE_TTL_MS < ttl_ms("live") <= retention.HISTORY_TTL_MS
        assert retention.GONE_TTL_MS < ttl_ms(f"copies@{stay}") <= retention.HISTORY_TTL_MS
        sent_before = len(broker.slots("live"))
        seconds(clock, beat, 2)
        assert len(broker.slots("live")) > sent_before  # what runs goes on
        assert client.zscore(f"{{{key_prefix}}}:removed", "gone") is not None
    finally:
        client.close()
