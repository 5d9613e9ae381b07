"""A beat with Sentry's Celery integration (``monitor_beat_tasks=True``), run in a fresh
interpreter by tests/beat/test_sentry_crons.py: Sentry patches Celery for the whole process.

``python -m tests.beat.sentry_beat OUT`` runs the Scheduler on the real Redis named by
``$HASHBEAT_REDIS_URL`` (broker and store, keys under ``$HASHBEAT_PREFIX``) for two minutes of
a clock it moves, and writes to OUT (JSON) what Sentry was sent (envelope items, kept by a
transport that sends nothing) and the headers of every message on the broker queue."""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis
import sentry_sdk
from celery import Celery
from celery.schedules import crontab
from sentry_sdk.envelope import Envelope
from sentry_sdk.integrations.celery import CeleryIntegration
from sentry_sdk.transport import Transport

from celery_hashbeat import Scheduler, hashcron

#: A whole minute (2030-01-01T00:00:00Z): the clock the beat runs on starts here.
T0 = 1_893_456_000.0

ITEMS: list[dict[str, Any]] = []


class Kept(Transport):
    """A Sentry transport that keeps what it is given and sends nothing."""

    def capture_envelope(self, envelope: Envelope) -> None:
        for item in envelope.items:
            payload = item.payload.json
            ITEMS.append({"type": item.type, "payload": payload})


class Clock:
    now = T0

    def __call__(self) -> float:
        return self.now


def report() -> None:
    """The task of two entries: known to the beat, so sent by the task's own apply_async."""


def main(out: str) -> None:
    sentry_sdk.init(
        dsn="https://public@sentry.invalid/1",
        transport=Kept,
        integrations=[CeleryIntegration(monitor_beat_tasks=True)],
        traces_sample_rate=1.0,
    )
    url, prefix = os.environ["HASHBEAT_REDIS_URL"], os.environ["HASHBEAT_PREFIX"]
    queue = f"{prefix}-queue"
    app = Celery("sentry-beat", set_as_current=False)
    app.conf.update(
        broker_url=url,
        task_default_queue=queue,
        hashbeat_store_url=url,
        hashbeat_key_prefix=prefix,
        beat_schedule={
            "nightly-report": {"task": "shop.report", "schedule": crontab()},
            "refresh-cache": {"task": "shop.refresh", "schedule": timedelta(minutes=1)},
            "hashed": {"task": "shop.report", "schedule": hashcron("* * * * *")},
        },
    )
    app.task(name="shop.report", shared=False)(report)
    clock = Clock()
    beat = Scheduler(app, lazy=True)
    beat.clock = clock
    beat.setup_schedule()
    try:
        beat.tick()
        for _ in range(2):
            clock.now += 60
            for _ in range(3):
                beat.tick()
    finally:
        beat.close()
    sentry_sdk.flush()
    client = redis.Redis.from_url(url)
    raw = client.lrange(queue, 0, -1)
    client.close()
    messages = [json.loads(message)["headers"] for message in reversed(raw)]
    Path(out).write_text(json.dumps({"items": ITEMS, "messages": messages}, default=str))


if __name__ == "__main__":
    main(sys.argv[1])
