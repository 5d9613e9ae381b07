"""A Celery app whose entries have the shapes the commands once planned differently from the
beat: plain intervals, in seconds and as a timedelta (anchored by the leader), copies on
workers, a balanced group and Celery's own ``celery.backend_cleanup``. HASHBEAT_TEST_STORE_URL
and HASHBEAT_TEST_PREFIX name the store, as for ``tests.cli.proj``."""

from __future__ import annotations

import os
from datetime import timedelta

from celery import Celery

from celery_hashbeat import hashcron

#: The balanced entries: sixty hourly ones, which pure hashing bunches onto fewer minutes.
BALANCED = [f"report-{n}" for n in range(60)]

app = Celery("planned", broker="memory://", set_as_current=False)
app.conf.update(
    timezone="UTC",
    beat_enable_remote_control=False,
    worker_direct=True,
    hashbeat_store_url=os.environ.get("HASHBEAT_TEST_STORE_URL", "sqlite:///:memory:"),
    hashbeat_key_prefix=os.environ.get("HASHBEAT_TEST_PREFIX", "hashbeat"),
    beat_schedule={
        "heartbeat": {"task": "planned.ping", "schedule": 90.0},
        "pulse": {"task": "planned.ping", "schedule": timedelta(seconds=75)},
        "fanned": {
            "task": "planned.ping",
            "schedule": hashcron("H H * * *"),
            "workers": ["celery@a", "celery@b"],
        },
        **{
            name: {"task": "planned.report", "schedule": hashcron("H * * * *", balanced=True)}
            for name in BALANCED
        },
    },
)
