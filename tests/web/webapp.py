"""A Celery app for the console's CLI tests: a store in a temporary SQLite file, one entry."""

from __future__ import annotations

import tempfile
from pathlib import Path

from celery import Celery

from celery_hashbeat.schedules import hashcron

app = Celery("webapp", broker="memory://", set_as_current=False)
app.conf.hashbeat_store_url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'store.sqlite'}"
app.conf.beat_schedule = {"nightly": {"task": "shop.report", "schedule": hashcron("H H * * *")}}
