"""A small Celery app for the command line tests, configured from the environment.

HASHBEAT_TEST_STORE_URL and HASHBEAT_TEST_PREFIX name the store, so that each test (and each
subprocess it starts) looks at a store of its own.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from celery import Celery
from celery.schedules import crontab, solar

from celery_hashbeat import hashcron, hashinterval

app = Celery("proj", broker="memory://", set_as_current=False)
app.conf.update(
    timezone="UTC",
    hashbeat_store_url=os.environ.get("HASHBEAT_TEST_STORE_URL", "sqlite:///:memory:"),
    hashbeat_key_prefix=os.environ.get("HASHBEAT_TEST_PREFIX", "hashbeat"),
    beat_schedule={
        "refresh-prices": {"task": "proj.refresh", "schedule": hashcron("H * * * *")},
        "nightly-report": {"task": "proj.report", "schedule": hashcron("@midnight")},
        "poll-feeds": {"task": "proj.poll", "schedule": hashcron("H/10 * * * * *")},
        "riga-morning": {
            "task": "proj.report",
            "schedule": hashcron("H(0-29) 9 * * 1-5", tz="Europe/Riga"),
        },
        "sync": {"task": "proj.sync", "schedule": hashinterval(timedelta(minutes=15))},
        "cleanup": {"task": "proj.cleanup", "schedule": crontab(minute=0, hour=4)},
        "heartbeat": {"task": "proj.ping", "schedule": 30.0},
        "sunset": {"task": "proj.lights", "schedule": solar("sunset", 56.95, 24.1)},
    },
)


@app.on_after_configure.connect
def add_periodic(sender: Celery, **_: Any) -> None:
    """An entry added the way Celery's docs show, to check that commands see it too."""
    sender.add_periodic_task(timedelta(hours=1), refresh_all.s(), name="added-hourly")


@app.task
def refresh_all() -> None:
    """A task for the periodic entry above."""
