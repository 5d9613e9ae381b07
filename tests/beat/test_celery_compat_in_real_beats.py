"""Issue 8, items 8 and 9, with real ``celery beat`` processes: a beat answers SIGTERM while
its broker is unreachable, and a plain interval keeps its cadence across a restart made before
its first run. Both were fixed by the hardening work (docs/design.md §10); these tests keep
them so."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.broker import iso_to_ms
from tests.support.processes import Process, ProcessGroup, wait_until

APP = "tests.beat.config_app"

pytestmark = pytest.mark.slow  # real beat processes


def closed_port() -> int:
    """A local port nothing listens on: a broker there refuses every connection."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def group(tmp_path: Path) -> Iterator[ProcessGroup]:
    with ProcessGroup(tmp_path) as processes:
        yield processes


def start_beat(
    group: ProcessGroup, name: str, config: dict[str, object], app: str = APP, **env: str
) -> Process:
    env["HASHBEAT_CONFIG"] = json.dumps(config)
    args = [
        sys.executable, "-m", "celery", "-A", app, "beat",
        "-S", "celery_hashbeat.Scheduler", "--loglevel=INFO",
        f"--pidfile={group.workdir / f'{name}.pid'}",
    ]  # fmt: skip
    return group.start(name, args, env)


def test_sigterm_is_answered_while_the_broker_is_unreachable(
    group: ProcessGroup, redis_url: str, key_prefix: str
) -> None:
    config = {
        "broker_url": f"redis://127.0.0.1:{closed_port()}/0",
        "hashbeat_store_url": redis_url,
        "hashbeat_key_prefix": key_prefix,
        "beat_schedule": {"every-second": {"task": "shop.tick", "schedule": 1.0}},
    }
    beat = start_beat(group, "beat", config)
    log = beat.log
    # Leading, it has tried to send (whether it says so before or after trying to connect);
    # then it is well into retrying the broker.
    tried = ("Sending due task every-second", "the broker is not answering")
    assert wait_until(lambda: any(line in log.read_text() for line in tried), 30), beat.log_tail()
    time.sleep(2.5)
    started = time.monotonic()
    beat.terminate()
    code = beat.wait(10)
    took = time.monotonic() - started
    assert code == 0, beat.log_tail()
    assert took < 3, f"took {took:.1f}s to answer SIGTERM\n{beat.log_tail()}"
    assert "Traceback" not in log.read_text()


def test_an_interval_keeps_its_cadence_across_a_restart_before_its_first_run(
    group: ProcessGroup, redis_url: str, key_prefix: str
) -> None:
    queue = f"{key_prefix}-queue"
    config = {
        "broker_url": redis_url,
        "task_default_queue": queue,
        "hashbeat_store_url": redis_url,
        "hashbeat_key_prefix": key_prefix,
        "beat_schedule": {"every-4s": {"task": "shop.tick", "schedule": 4.0}},
    }
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        first = start_beat(group, "first", config)
        assert wait_until(lambda: "acquired the lease" in first.log.read_text(), 30), (
            first.log_tail()
        )
        time.sleep(1.5)
        first.terminate()  # stopped 1.5 s into the entry's first 4 s: it never ran
        assert first.wait(10) == 0
        assert client.llen(queue) == 0
        restarted = time.time() * 1000
        second = start_beat(group, "second", config)
        assert wait_until(lambda: client.llen(queue) >= 2, 30), second.log_tail()
        slots = [
            iso_to_ms(json.loads(raw)["headers"]["hashbeat_slot"])
            for raw in reversed(client.lrange(queue, 0, -1))
        ]
        # The slots count from where the first beat first saw the entry (at most 4 s after it
        # led, so at most 2.5 s after the restart), not 4 s from the restart.
        assert slots[0] <= restarted + 3_000, (slots[0] - restarted, second.log_tail())
        assert slots[1] - slots[0] == 4_000
    finally:
        client.close()


@pytest.mark.parametrize("quiet", [False, True], ids=["celery.beat at INFO", "at WARNING"])
def test_the_send_lines_follow_the_celery_beat_logger(
    group: ProcessGroup, redis_url: str, key_prefix: str, quiet: bool
) -> None:
    """Issue 8, item 7: setting ``celery.beat`` to WARNING silences the send lines of a real
    ``celery beat``, as under Celery's scheduler; the beat's own lines keep their logger."""
    queue = f"{key_prefix}-queue"
    config = {
        "broker_url": redis_url,
        "task_default_queue": queue,
        "hashbeat_store_url": redis_url,
        "hashbeat_key_prefix": key_prefix,
        "beat_schedule": {"every-second": {"task": "shop.tick", "schedule": 1.0}},
    }
    env = {"HASHBEAT_QUIET_BEAT": "1"} if quiet else {}
    beat = start_beat(group, "beat", config, "tests.beat.quiet_app", **env)
    client = redis.Redis.from_url(redis_url)
    try:
        assert wait_until(lambda: client.llen(queue) >= 2, 30), beat.log_tail()
    finally:
        client.close()
    beat.terminate()
    assert beat.wait(10) == 0, beat.log_tail()
    log = beat.log.read_text()
    assert "beat: acquired the lease" in log  # the beat's own lines are not silenced
    assert ("Sending due task every-second" in log) is not quiet, beat.log_tail()
