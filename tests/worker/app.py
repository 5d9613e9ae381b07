"""The Celery app that the worker scenarios run in real ``celery worker`` and ``celery beat``
processes, configured from the environment by the test that starts them.

Environment: ``HASHBEAT_WORKERS_REDIS`` (broker, store and the runs' record),
``HASHBEAT_WORKERS_PREFIX`` and ``HASHBEAT_WORKERS_SCHEDULE`` (``overlap`` or ``fanout``). Every
task run appends ``{entry, slot, event, at, host, pid}`` to the Redis list ``<prefix>:runs`` when
it starts and, if it gets there, when it ends; the test reads the record, never the beat's log.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import redis
from celery import Celery, Task
from celery.exceptions import SoftTimeLimitExceeded

from celery_hashbeat import hashcron

REDIS = os.environ.get("HASHBEAT_WORKERS_REDIS", "redis://127.0.0.1:6379/0")
PREFIX = os.environ.get("HASHBEAT_WORKERS_PREFIX", "hashbeat-workers")
EVERY_2S = "*/2 * * * * *"

#: The run TTL of the scenarios: short, so that a lease lapses within the test, and shorter than
#: the long runs, so that those live only by being renewed.
RUNNING_TTL = float(os.environ.get("HASHBEAT_WORKERS_RUNNING_TTL", "3.0"))


def overlap_schedule() -> dict[str, dict[str, Any]]:
    """Every entry every 2 s; the long ones run 5 s."""

    def every_2s(task: str, overlap: str, **extra: Any) -> dict[str, Any]:
        return {"task": task, "schedule": hashcron(EVERY_2S), "overlap": overlap, **extra}

    return {
        "skip-long": every_2s("workers.run", "skip", kwargs={"seconds": 5}),
        "allow-long": every_2s(
            "workers.run", "allow", kwargs={"seconds": 5}, options={"queue": "allow"}
        ),
        "buffer-long": every_2s(
            "workers.run", "buffer_one", kwargs={"seconds": 5}, catch_up="latest"
        ),
        "replace-long": every_2s("workers.run", "replace", kwargs={"seconds": 5}),
        "raises": every_2s("workers.fail", "skip"),
        "retries": every_2s("workers.retry_once", "skip"),
        "time-limited": every_2s("workers.hangs", "skip"),
        "victim": every_2s("workers.run", "skip", kwargs={"seconds": 30}, options={
            "queue": "allow"}),
    }  # fmt: skip


def fanout_schedule() -> dict[str, dict[str, Any]]:
    """One entry on every live worker, one on a listed worker only; each every 3 s at the
    second its key hashes to."""
    return {
        "fan-all": {"task": "workers.run", "schedule": hashcron("H/3 * * * * *"), "workers": "*"},
        "fan-listed": {
            "task": "workers.run",
            "schedule": hashcron("H/3 * * * * *"),
            "workers": ["w1@hashbeat-test"],
        },
    }


def history_schedule() -> dict[str, dict[str, Any]]:
    """Every 2 s: a run of 0.3 s, a failure, a task killed by its time limit, and one whose
    process dies under it."""
    return {
        "quick": {
            "task": "workers.run",
            "schedule": hashcron(EVERY_2S),
            "kwargs": {"seconds": 0.3},
        },
        "raises": {"task": "workers.fail", "schedule": hashcron(EVERY_2S)},
        "time-limited": {"task": "workers.hangs", "schedule": hashcron(EVERY_2S)},
        "dies": {"task": "workers.dies", "schedule": hashcron(EVERY_2S)},
    }


def control_schedule() -> dict[str, dict[str, Any]]:
    """One configured entry every 2 s; the rest is added at run time
    (test_operator_commands_reach_real_beats)."""
    return {"configured": {"task": "workers.run", "schedule": hashcron(EVERY_2S)}}


def revoke_schedule() -> dict[str, dict[str, Any]]:
    """One guarded entry every 2 s whose runs last a minute: only a revoke ends one early."""
    return {
        "long": {
            "task": "workers.run",
            "schedule": hashcron(EVERY_2S),
            "overlap": "skip",
            "kwargs": {"seconds": 60},
            "catch_up": "skip",
        }
    }


def trigger_schedule() -> dict[str, dict[str, Any]]:
    """One guarded entry whose slots never come during a test: it runs only when triggered
    (tests/worker/test_triggers_follow_overlap.py), 8 s each run."""
    return {
        "guarded": {
            "task": "workers.run",
            "schedule": hashcron("H H 1 1 *"),
            "overlap": "skip",
            "kwargs": {"seconds": 8},
        }
    }


def promises_schedule() -> dict[str, dict[str, Any]]:
    """Every 2 s: a task that always fails, paused by the leader after 3 failures in a row,
    and one that succeeds, with the same promises (tests/worker/test_promises.py)."""
    promises = {"pause_after_failures": 3, "alert_after_failures": 2, "max_lateness": 60}
    return {
        "flaky": {"task": "workers.fail", "schedule": hashcron(EVERY_2S), **promises},
        "healthy": {"task": "workers.run", "schedule": hashcron(EVERY_2S), **promises},
    }


def backfill_schedule() -> dict[str, dict[str, Any]]:
    """Every 2 s: a quick run any number of which may overlap, and a 1.5 s run that waits for
    the one before (tests/worker/test_backfill_sends_each_slot_once.py pauses each a while and
    backfills what the pause held back)."""
    return {
        "steady": {"task": "workers.run", "schedule": hashcron(EVERY_2S)},
        "serial": {
            "task": "workers.run",
            "schedule": hashcron(EVERY_2S),
            "overlap": "buffer_one",
            "catch_up": "latest",
            "kwargs": {"seconds": 1.5},
        },
    }


SCHEDULES = {
    "backfill": backfill_schedule,
    "promises": promises_schedule,
    "revoke": revoke_schedule,
    "overlap": overlap_schedule,
    "fanout": fanout_schedule,
    "history": history_schedule,
    "control": control_schedule,
    "trigger": trigger_schedule,
}

app = Celery("hashbeat-workers")
app.conf.update(
    broker_url=REDIS,
    broker_connection_retry_on_startup=True,
    timezone="UTC",
    worker_direct=True,
    # One task per free process: a message waiting behind a busy process would outlive its run
    # lease before it starts.
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=True,
    task_default_queue=f"{PREFIX}-default",
    hashbeat_store_url=REDIS,
    hashbeat_key_prefix=PREFIX,
    hashbeat_lease_ttl=3.0,
    hashbeat_running_ttl=RUNNING_TTL,
    hashbeat_workers_refresh=1.0,
    hashbeat_catch_up="all",
    beat_schedule=SCHEDULES[os.environ.get("HASHBEAT_WORKERS_SCHEDULE", "overlap")](),
)
if os.environ.get("HASHBEAT_WORKERS_HTTP_PORT"):  # the beat's /metrics, per entry
    app.conf.update(
        hashbeat_http_port=int(os.environ["HASHBEAT_WORKERS_HTTP_PORT"]),
        hashbeat_metrics_entry_labels=True,
    )

#: The record's connection, made per worker process, after the fork.
_clients: dict[int, redis.Redis[str]] = {}


def record(task: Task[Any, Any], event: str) -> None:
    client = _clients.get(os.getpid())
    if client is None:
        client = _clients[os.getpid()] = redis.Redis.from_url(REDIS, decode_responses=True)
    request = task.request
    run = {
        "entry": request.get("hashbeat_entry"),
        "slot": request.get("hashbeat_slot"),
        "trigger": request.get("hashbeat_trigger"),
        "task_id": request.id,
        "event": event,
        "at": time.time(),
        "host": request.hostname,
        "pid": os.getpid(),
    }
    client.rpush(f"{PREFIX}:runs", json.dumps(run))


@app.task(name="workers.run", bind=True)
def run(self: Task[Any, Any], seconds: float = 0.0) -> None:
    record(self, "start")
    try:
        time.sleep(seconds)
    except SoftTimeLimitExceeded:
        record(self, "soft-limit")
        raise
    record(self, "end")


@app.task(name="workers.hangs", bind=True, time_limit=1)
def hangs(self: Task[Any, Any]) -> None:
    """Killed by its hard time limit, in the middle of a run that would last 5 s."""
    record(self, "start")
    time.sleep(5)
    record(self, "end")


@app.task(name="workers.fail", bind=True)
def fail(self: Task[Any, Any]) -> None:
    record(self, "start")
    raise RuntimeError("this task always fails")


@app.task(name="workers.retry_once", bind=True, max_retries=1)
def retry_once(self: Task[Any, Any]) -> None:
    record(self, "start")
    if not self.request.retries:
        raise self.retry(countdown=0.3)
    record(self, "end")


@app.task(name="workers.dies", bind=True)
def dies(self: Task[Any, Any]) -> None:
    """Its pool process is killed mid-run, as the OOM killer would."""
    record(self, "start")
    os.kill(os.getpid(), signal.SIGKILL)
