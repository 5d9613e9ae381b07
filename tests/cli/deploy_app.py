"""An app whose beat_schedule is one of two releases, for ``hashbeat plan``: $HASHBEAT_RELEASE
("1", what the beats run, or "2", the candidate), its store and broker from the environment as
tests/cli/proj.py takes them.

Release 2 removes ``gone``, changes ``hourly``'s expression, adds ``report-192`` to the balanced
``H * * * *`` entries (its hashed minute is ``report-a``'s, which the balancer then moves) and
leaves ``steady`` alone. With $HASHBEAT_ICAL (a file's path), both releases have ``closed``, a
daily entry excluding that iCalendar file's days."""

from __future__ import annotations

import os
from datetime import timedelta

from celery import Celery

from celery_hashbeat import hashcron

RELEASE = os.environ.get("HASHBEAT_RELEASE", "1")
STORE = os.environ.get("HASHBEAT_TEST_STORE_URL", "sqlite:///:memory:")

schedule: dict[str, dict[str, object]] = {
    "steady": {"task": "deploy.steady", "schedule": timedelta(minutes=10)},
    "hourly": {"task": "deploy.hourly", "schedule": hashcron("H * * * *")},
    "report-a": {"task": "deploy.report", "schedule": hashcron("H * * * *", balanced=True)},
    "report-b": {"task": "deploy.report", "schedule": hashcron("H * * * *", balanced=True)},
}
if RELEASE == "1":
    schedule["gone"] = {"task": "deploy.gone", "schedule": hashcron("H H * * *")}
else:
    schedule["hourly"] = {"task": "deploy.hourly", "schedule": hashcron("H/30 * * * *")}
    schedule["report-192"] = {
        "task": "deploy.report",
        "schedule": hashcron("H * * * *", balanced=True),
    }

if os.environ.get("HASHBEAT_ICAL"):
    schedule["closed"] = {
        "task": "deploy.closed",
        "schedule": hashcron("H 9 * * *", exclude=[f"ical:{os.environ['HASHBEAT_ICAL']}"]),
    }

app = Celery("deploy", set_as_current=False)
app.conf.update(
    broker_url=STORE if STORE.startswith("redis") else "memory://",
    timezone="UTC",
    beat_enable_remote_control=False,
    hashbeat_store_url=STORE,
    hashbeat_key_prefix=os.environ.get("HASHBEAT_TEST_PREFIX", "hashbeat"),
    beat_schedule=schedule,
)
