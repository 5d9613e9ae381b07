"""The example's Celery app: tasks, and a beat_schedule that shows each kind of schedule.

With no ``REDIS_URL`` it needs no server at all: kombu's filesystem transport (each message written
whole before a worker can see it: ``transport.py``) is the broker and
an SQLite file is the store, both in ``HASHBEAT_EXAMPLE_DIR`` (the launcher sets it). With
``REDIS_URL`` set, Redis is both broker and store, so beats on several hosts can share it.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from celery import Celery, Task
from celery.schedules import crontab

from celery_hashbeat import hashcron, hashinterval
from example_project import transport

app = Celery("example_project")

redis_url = os.environ.get("REDIS_URL")
if redis_url:
    app.conf.update(broker_url=redis_url, hashbeat_store_url=redis_url)
else:
    data = Path(os.environ.get("HASHBEAT_EXAMPLE_DIR", ".hashbeat-example")).resolve()
    queue = data / "queue"
    queue.mkdir(parents=True, exist_ok=True)
    app.conf.update(
        broker_url=f"{transport.SCHEME}://",
        broker_transport_options={
            "data_folder_in": str(queue),
            "data_folder_out": str(queue),
            # Fanout exchanges (remote control, beat's pidbox) live here, not in the cwd.
            "control_folder": str(data / "control"),
            "store_processed": False,
            "polling_interval": 0.2,
        },
        hashbeat_store_url=f"sqlite:///{data / 'store.sqlite'}",
    )

app.conf.update(
    hashbeat_key_prefix=os.environ.get("HASHBEAT_EXAMPLE_PREFIX", "example"),
    # A short lease so that the demo shows a takeover quickly; the default is 10 seconds.
    hashbeat_lease_ttl=6,
    timezone="Europe/Riga",
    beat_max_loop_interval=5,
    worker_hijack_root_logger=False,
    beat_schedule={
        # The seconds field: every 5 seconds, from a second chosen by the entry's name.
        "poll-feeds": {"task": "example_project.proj.poll", "schedule": hashcron("H/5 * * * * *")},
        # Once an hour, at a minute chosen by the entry's name.
        "refresh-prices": {
            "task": "example_project.proj.refresh",
            "schedule": hashcron("H * * * *"),
            "kwargs": {"currency": "EUR"},
        },
        # Every 15 minutes from a hashed start, in office hours, Monday to Friday.
        "sync-crm": {
            "task": "example_project.proj.refresh",
            "schedule": hashcron("H/15 H(9-16) * * 1-5"),
            "kwargs": {"currency": "USD"},
        },
        # An alias: once a day, between 00:00 and 02:59.
        "nightly-report": {
            "task": "example_project.proj.report",
            "schedule": hashcron("@midnight"),
        },
        # Every 10 seconds at a hashed offset inside each period.
        "heartbeat": {"task": "example_project.proj.poll", "schedule": hashinterval(10)},
        # Plain Celery schedules keep working beside the hashed ones.
        "cleanup": {"task": "example_project.proj.cleanup", "schedule": crontab(minute="*")},
        "tidy": {"task": "example_project.proj.cleanup", "schedule": timedelta(seconds=20)},
    },
)


def _announce(task: Task[..., str], what: str) -> str:
    """Print (and return) which entry and slot this run serves, from the hashbeat headers."""
    entry = getattr(task.request, "hashbeat_entry", None) or "?"
    slot = getattr(task.request, "hashbeat_slot", None) or "?"
    message = f"ran {what} for entry {entry}, slot {slot}"
    print(message, flush=True)
    return message


@app.task(bind=True)
def poll(self: Task[..., str]) -> str:
    return _announce(self, "poll")


@app.task(bind=True)
def refresh(self: Task[..., str], currency: str) -> str:
    return _announce(self, f"refresh({currency})")


@app.task(bind=True)
def report(self: Task[..., str]) -> str:
    return _announce(self, "report")


@app.task(bind=True)
def cleanup(self: Task[..., str]) -> str:
    return _announce(self, "cleanup")
