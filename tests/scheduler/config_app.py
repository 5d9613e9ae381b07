"""A Celery app configured from ``$HASHBEAT_CONFIG`` (JSON), for the tests that run ``celery
beat`` with a configuration mistake in it."""

from __future__ import annotations

import json
import os

from celery import Celery

app = Celery("hashbeat-config")
app.conf.update(broker_url="memory://", beat_schedule={})
app.conf.update(json.loads(os.environ.get("HASHBEAT_CONFIG", "{}")))
