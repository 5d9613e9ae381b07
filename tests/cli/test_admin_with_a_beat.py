"""The runtime-control commands against a real ``celery beat`` (DESIGN.md §13): what an operator
types is what the leader sends, read back from the real broker's queue."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import redis

from tests.support.processes import ProcessGroup, celery_beat_args, wait_until

Run = Callable[..., subprocess.CompletedProcess[str]]
APP = "tests.scheduler.config_app"


def sent(client: redis.Redis[bytes], queue: str) -> list[dict[str, str]]:
    """The headers of every message waiting in ``queue``, oldest first (kombu's Redis transport
    pushes each message at the list's head)."""
    return [json.loads(raw)["headers"] for raw in reversed(client.lrange(queue, 0, -1))]


def test_the_leader_follows_add_pause_trigger_resume_remove(
    run: Run, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    queue = f"{key_prefix}-queue"
    config = {
        "broker_url": redis_url,
        "task_default_queue": queue,
        "hashbeat_store_url": redis_url,
        "hashbeat_key_prefix": key_prefix,
    }
    env = {"HASHBEAT_CONFIG": json.dumps(config)}

    def hashbeat(*args: str) -> str:
        done = run("hashbeat", *args, "-A", APP, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    hashbeat(
        "add", "tick", "--task", "t.tick", "--cron", "H/2 * * * * *", "--allow-unregistered-task"
    )
    hashbeat("pause", "tick", "--reason", "not yet")  # so that the trigger goes out alone
    client: redis.Redis[bytes] = redis.Redis.from_url(redis_url)
    with ProcessGroup(tmp_path) as group:
        beat = group.start("beat", celery_beat_args(APP, tmp_path, "beat"), env)
        task_id = hashbeat("trigger", "tick").strip()
        assert wait_until(lambda: sent(client, queue), 15), beat.log_tail()
        (trigger,) = sent(client, queue)
        assert trigger["id"] == task_id and trigger["hashbeat_entry"] == "tick"
        assert "hashbeat_trigger" in trigger and "hashbeat_slot" not in trigger

        hashbeat("resume", "tick")
        assert wait_until(lambda: len(sent(client, queue)) >= 3, 8), beat.log_tail()
        slots = [h["hashbeat_slot"] for h in sent(client, queue)[1:]]
        assert len(set(slots)) == len(slots)  # no slot twice

        hashbeat("remove", "tick")
        settled = len(sent(client, queue)) + 1  # a slot may have been on its way
        assert not wait_until(lambda: len(sent(client, queue)) > settled, 4.5), beat.log_tail()
    client.close()  # the queue's keys carry the test's prefix: the fixture deletes them
