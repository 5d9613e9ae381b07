"""Issue 23, item 16, with the real sentry-sdk: ``CeleryIntegration(monitor_beat_tasks=True)``
patches Celery's ``Scheduler.apply_entry``; every slot the beat sends goes through it, so the
messages on the broker carry Sentry's monitor and trace headers and Sentry gets a check-in per
slot (kept by a transport that sends nothing). Run in a fresh interpreter
(tests/beat/sentry_beat.py), since Sentry patches Celery for the whole process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from celery_hashbeat.publish.message import slot_task_id
from tests.support.processes import ROOT

pytest.importorskip("sentry_sdk", reason="sentry-sdk is not installed (extra [test] has it)")

#: The slots of the two minutes the beat runs (epoch ms), as tests/beat/sentry_beat.py moves it.
SLOTS = [1_893_456_060_000, 1_893_456_120_000]
MONITORED = ["nightly-report", "refresh-cache"]


@pytest.fixture
def run(tmp_path: Path, redis_url: str, key_prefix: str) -> dict[str, list[dict[str, object]]]:
    out = tmp_path / "sentry.json"
    env = {
        **os.environ,
        "HASHBEAT_REDIS_URL": redis_url,
        "HASHBEAT_PREFIX": key_prefix,
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.beat.sentry_beat", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, list[dict[str, object]]] = json.loads(out.read_text())
    return result


def test_sentry_crons_sees_every_slot_and_its_headers_reach_the_broker(
    run: dict[str, list[dict[str, object]]],
) -> None:
    messages = run["messages"]
    by_entry = Counter(str(headers["hashbeat_entry"]) for headers in messages)
    assert by_entry == {"nightly-report": 2, "refresh-cache": 2, "hashed": 2}
    for headers in messages:
        name = str(headers["hashbeat_entry"])
        # The slot's own task id, as on the batch path.
        assert headers["id"] in {slot_task_id(name, slot) for slot in SLOTS}
        # Sentry's trace, added by its patch of apply_async, on every message.
        assert "sentry-trace" in headers, headers
        if name in MONITORED:
            assert headers["sentry-monitor-slug"] == name
            assert headers["sentry-monitor-check-in-id"]
        else:  # Sentry Crons knows crontab and interval schedules only
            assert "sentry-monitor-slug" not in headers
    check_ins = [item["payload"] for item in run["items"] if item["type"] == "check_in"]
    assert all(isinstance(check_in, dict) for check_in in check_ins)
    seen = sorted(
        (str(c["monitor_slug"]), str(c["check_in_id"]), str(c["status"]))
        for c in check_ins
        if isinstance(c, dict)
    )
    sent = sorted(
        (str(h["hashbeat_entry"]), str(h["sentry-monitor-check-in-id"]), "in_progress")
        for h in messages
        if h["hashbeat_entry"] in MONITORED
    )
    assert seen == sent
