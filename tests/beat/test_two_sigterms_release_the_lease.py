"""Two SIGTERMs back to back (a supervisor and ``timeout`` both signalling, or an impatient
operator) still release the lease exactly once (docs/design.md §10): the second signal must not
cut the release short, or a standby waits out the whole TTL. Real ``celery beat`` processes on a
private redis-server, stopped over and over, since the second signal lands at a different point
each time."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import redis

from tests.support.processes import ProcessGroup, celery_beat_args, wait_until
from tests.support.redis_server import RedisProcess

pytestmark = pytest.mark.slow

APP = "tests.beat.config_app"
PREFIX = "two-sigterms"
LEASE = "{" + PREFIX + "}:leader"
TRIES = 16
#: Between the two signals: none, a few milliseconds, or long enough for the second to land
#: while the process is already leaving, so that it comes before, during or after the release
#: the first one started.
GAPS_S = (0.0, 0.001, 0.002, 0.004, 0.008, 0.05, 0.15, 0.3)


def test_two_sigterms_back_to_back_release_the_lease_every_time(tmp_path: Path) -> None:
    with RedisProcess() as server, ProcessGroup(tmp_path) as group:
        config = {
            "broker_url": server.url,
            "hashbeat_store_url": server.url,
            "hashbeat_key_prefix": PREFIX,
            "hashbeat_lease_ttl": 60,  # a lease left behind would hold for a minute
        }
        env = {"HASHBEAT_CONFIG": json.dumps(config)}
        client = redis.Redis.from_url(server.url)
        kept = []
        for attempt in range(TRIES):
            name = f"beat-{attempt}"
            beat = group.start(name, celery_beat_args(APP, tmp_path, name), env)
            token = f":{beat.pid}:".encode()
            assert wait_until(lambda: token in (client.get(LEASE) or b""), 30), beat.log_tail()  # noqa: B023
            os.kill(beat.pid, signal.SIGTERM)
            time.sleep(GAPS_S[attempt % len(GAPS_S)])
            os.kill(beat.pid, signal.SIGTERM)
            code = beat.wait(15)
            assert code is not None, beat.log_tail()
            log = beat.log.read_text(errors="replace")
            if client.get(LEASE) is not None or "released the lease" not in log or code != 0:
                kept.append((attempt, code, client.get(LEASE), beat.log_tail(8)))
                client.delete(LEASE)
        client.close()
    assert kept == [], kept
