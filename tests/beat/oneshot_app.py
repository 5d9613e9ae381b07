"""A Celery app for the ``celery beat`` tests of one-shots and calendars: configured from
``$HASHBEAT_CONFIG`` (JSON) as tests/beat/config_app.py is, plus three entries built here, since
JSON cannot hold schedule objects: ``once`` (``at($HASHBEAT_AT)``), ``ticks`` (every second) and
``closed`` (every second, excluding the days in ``$HASHBEAT_EXCLUDE``)."""

from __future__ import annotations

import json
import os

from celery import Celery

from celery_hashbeat import at, hashcron

app = Celery("hashbeat-oneshots")
app.conf.update(broker_url="memory://")
app.conf.update(json.loads(os.environ.get("HASHBEAT_CONFIG", "{}")))
app.conf.beat_schedule = {
    "once": {"task": "shop.once", "schedule": at(os.environ["HASHBEAT_AT"])},
    "ticks": {"task": "shop.tick", "schedule": hashcron("* * * * * *")},
    "closed": {
        "task": "shop.closed",
        "schedule": hashcron("* * * * * *", exclude=[os.environ["HASHBEAT_EXCLUDE"]]),
    },
}
