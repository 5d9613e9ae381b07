"""A Celery app with calendars and a one-shot, for the command line tests of the views
(docs/design.md §20, §21); its store is named by the environment, as tests/cli/proj.py's is."""

from __future__ import annotations

import os

from celery import Celery

from celery_hashbeat import at, hashcron

app = Celery("calendar-proj", broker="memory://", set_as_current=False)
app.conf.update(
    timezone="UTC",
    hashbeat_store_url=os.environ.get("HASHBEAT_TEST_STORE_URL", "sqlite:///:memory:"),
    hashbeat_key_prefix=os.environ.get("HASHBEAT_TEST_PREFIX", "hashbeat"),
    beat_schedule={
        "weekdays": {"task": "proj.report", "schedule": hashcron("H H * * *", exclude="sat,sun")},
        "moved": {
            "task": "proj.report",
            "schedule": hashcron("0 12 * * *"),
            "exclude": ["2031-01-01"],
            "on_excluded": "previous_business_day",
        },
        "launch": {"task": "proj.launch", "schedule": at("2031-06-01T09:00:00+02:00")},
    },
)
if os.environ.get("HASHBEAT_CLOSED"):  # a range of days, for an hourly entry to skip
    app.conf.beat_schedule["closed"] = {
        "task": "proj.report",
        "schedule": hashcron("0 * * * *"),
        "exclude": [os.environ["HASHBEAT_CLOSED"]],
    }
