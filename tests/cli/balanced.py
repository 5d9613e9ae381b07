"""An app whose sixty hourly reports are balanced (hashbeat_balance), for the command line
tests of docs/design.md §16; the store comes from the environment, as in tests.cli.proj."""

from __future__ import annotations

import os

from celery import Celery

from celery_hashbeat import hashcron

app = Celery("balanced", broker="memory://", set_as_current=False)
app.conf.update(
    timezone="UTC",
    hashbeat_balance=True,
    hashbeat_store_url=os.environ.get("HASHBEAT_TEST_STORE_URL", "sqlite:///:memory:"),
    hashbeat_key_prefix=os.environ.get("HASHBEAT_TEST_PREFIX", "hashbeat"),
    beat_schedule={
        f"report-{n}": {"task": "reports.build", "schedule": hashcron("H * * * *")}
        for n in range(60)
    },
)
