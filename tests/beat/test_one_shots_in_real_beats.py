"""One-shots and calendars with real ``celery beat`` processes on a real Redis (store and broker):
the one-shot is sent once at its instant; after its beat is killed (SIGKILL) and another takes
over, and after a restart, it is not sent again; an entry whose calendar excludes today sends
nothing while one beside it sends every second."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from tests.support.broker import iso_to_ms
from tests.support.processes import Process, ProcessGroup, wait_until

APP = "tests.beat.oneshot_app"

pytestmark = pytest.mark.slow  # real beat processes


@pytest.fixture
def group(tmp_path: Path) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path) as processes:
        yield processes


def start_beat(group: ProcessGroup, name: str, env: dict[str, str]) -> Process:
    args = [
        sys.executable, "-m", "celery", "-A", APP, "beat",
        "-S", "celery_hashbeat.Scheduler", "--loglevel=INFO",
        f"--pidfile={group.workdir / f'{name}.pid'}",
    ]  # fmt: skip
    return group.start(name, args, env)


def test_a_one_shot_is_sent_once_across_a_killed_leader_and_a_restart(
    group: ProcessGroup, redis_url: str, key_prefix: str
) -> None:
    queue = f"{key_prefix}-queue"
    now = datetime.now(timezone.utc)
    instant = (now + timedelta(seconds=6)).replace(microsecond=0)
    today = now.date()
    env = {
        "HASHBEAT_CONFIG": json.dumps(
            {
                "broker_url": redis_url,
                "task_default_queue": queue,
                "hashbeat_store_url": redis_url,
                "hashbeat_key_prefix": key_prefix,
                "hashbeat_lease_ttl": 3,
            }
        ),
        "HASHBEAT_AT": instant.isoformat(),
        "HASHBEAT_EXCLUDE": f"{today - timedelta(days=1)}..{today + timedelta(days=1)}",
    }
    client = redis.Redis.from_url(redis_url, decode_responses=True)

    def sent() -> Counter[str]:
        return Counter(
            json.loads(raw)["headers"]["hashbeat_entry"] for raw in client.lrange(queue, 0, -1)
        )

    def once_slots() -> list[int]:
        return [
            iso_to_ms(json.loads(raw)["headers"]["hashbeat_slot"])
            for raw in client.lrange(queue, 0, -1)
            if json.loads(raw)["headers"]["hashbeat_entry"] == "once"
        ]

    try:
        beats = [start_beat(group, "first", env), start_beat(group, "second", env)]
        assert wait_until(lambda: sent()["once"] >= 1, 40), beats[0].log_tail()
        leader = next(b for b in beats if "acquired the lease" in b.log.read_text())
        standby = next(b for b in beats if b is not leader)
        leader.kill()  # SIGKILL: no clean stop, the lease must lapse
        ticks = sent()["ticks"]
        assert wait_until(lambda: sent()["ticks"] >= ticks + 3, 30), standby.log_tail()
        standby.terminate()
        assert standby.wait(10) == 0
        restarted = start_beat(group, "restarted", env)
        ticks = sent()["ticks"]
        assert wait_until(lambda: sent()["ticks"] >= ticks + 3, 30), restarted.log_tail()

        assert once_slots() == [int(instant.timestamp() * 1000)]
        assert sent()["closed"] == 0
    finally:
        client.close()
