"""A Celery app configured from ``$HASHBEAT_CONFIG`` (JSON), for the tests that run ``celery
beat`` with a configuration mistake in it. With ``$HASHBEAT_DJANGO`` set, the configuration is
read as Django's settings are: upper case, under ``namespace="CELERY"``."""

from __future__ import annotations

import json
import os

from celery import Celery

app = Celery("hashbeat-config")
app.conf.update(broker_url="memory://", beat_schedule={})
config = json.loads(os.environ.get("HASHBEAT_CONFIG", "{}"))
if os.environ.get("HASHBEAT_DJANGO"):
    app.config_from_object(type("DjangoSettings", (), config), namespace="CELERY")
else:
    app.conf.update(config)
