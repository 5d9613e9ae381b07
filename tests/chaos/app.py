"""The Celery app the chaos beats run, configured from the environment by the test that starts
them (``celery -A tests.chaos.app beat -S celery_hashbeat.Scheduler``).

Environment: ``HASHBEAT_CHAOS_BROKER``, ``HASHBEAT_CHAOS_STORE``, ``HASHBEAT_CHAOS_PREFIX``,
``HASHBEAT_CHAOS_QUEUE``, ``HASHBEAT_CHAOS_TTL`` (seconds), ``HASHBEAT_CHAOS_CATCH_UP``,
``HASHBEAT_CHAOS_SCHEDULE`` (a name from ``schedule_for``), ``HASHBEAT_CHAOS_HTTP_PORT`` (serve
/metrics and the probes there; unset: no HTTP) and, optionally,
``HASHBEAT_CHAOS_PUBLISH_LOG``: a file where the beat appends ``entry, slot, publish time`` after
every publish, for the punctuality benchmark; ``HASHBEAT_CHAOS_IDLE_THREAD=1`` starts an idle
thread at import, as error trackers and metrics exporters do (a signal may then reach any thread).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import after_task_publish

from celery_hashbeat import hashcron, hashinterval

TASK = "chaos.tick"


def chaos_schedule() -> dict[str, dict[str, Any]]:
    """Second-level entries, hashed and plain: cron with and without H, a hashed interval and
    Celery's own timedelta (whose slots chain from the last one)."""
    return {
        "every-second": {"task": TASK, "schedule": hashcron("*/1 * * * * *")},
        "hashed-2s": {"task": TASK, "schedule": hashcron("H/2 * * * * *")},
        "hashed-interval-3s": {"task": TASK, "schedule": hashinterval(3)},
        "plain-1s": {"task": TASK, "schedule": timedelta(seconds=1)},
    }


def schedule_for(name: str) -> dict[str, dict[str, Any]]:
    """``chaos``; ``sparse`` (one entry every five seconds); ``failover`` (chaos plus a 250 ms
    hashed interval, so a new leader always has a slot due within a quarter second); ``burst:N``
    (N entries every second, all at once); ``spread-cron:N`` (N entries ``H * * * * *``, once a
    minute at a hashed second); ``spread-interval:N`` (N entries every 60 s at a hashed ms)."""
    kind, _, count = name.partition(":")
    if kind == "chaos":
        return chaos_schedule()
    if kind == "failover":
        return {
            **chaos_schedule(),
            "quarter-second": {"task": TASK, "schedule": hashinterval(0.25)},
        }
    if kind == "observe":
        return {
            **chaos_schedule(),
            # Its first run holds the run lease for hashbeat_running_ttl (no worker releases it),
            # so every later slot is skipped for overlap.
            "guarded": {"task": TASK, "schedule": hashcron("*/1 * * * * *"), "overlap": "skip"},
            "skip-missed": {
                "task": TASK,
                "schedule": hashcron("*/1 * * * * *"),
                "catch_up": "skip",
            },
        }
    if kind == "sparse":
        # One send every five seconds, and nothing between: no claim soon after a send.
        return {"sparse": {"task": TASK, "schedule": hashcron("*/5 * * * * *")}}
    if kind == "burst":
        return {
            f"burst-{i}": {"task": TASK, "schedule": hashcron("* * * * * *")}
            for i in range(int(count))
        }
    if kind == "spread-cron":
        return {
            f"cron-{i}": {"task": TASK, "schedule": hashcron("H * * * * *")}
            for i in range(int(count))
        }
    if kind == "spread-interval":
        return {
            f"interval-{i}": {"task": TASK, "schedule": hashinterval(60)} for i in range(int(count))
        }
    raise ValueError(f"unknown chaos schedule {name!r}")


def env(name: str, default: str) -> str:
    return os.environ.get(f"HASHBEAT_CHAOS_{name}", default)


QUEUE = env("QUEUE", "hashbeat-chaos")

app = Celery("hashbeat-chaos")
app.conf.update(
    broker_url=env("BROKER", "redis://127.0.0.1:6379/0"),
    broker_connection_retry_on_startup=True,
    timezone="UTC",
    task_default_queue=QUEUE,
    task_default_exchange=QUEUE,
    task_default_routing_key=QUEUE,
    hashbeat_store_url=env("STORE", "sqlite:///hashbeat-chaos.sqlite"),
    hashbeat_key_prefix=env("PREFIX", "hashbeat-chaos"),
    hashbeat_lease_ttl=float(env("TTL", "3")),
    hashbeat_catch_up=env("CATCH_UP", "all"),
    beat_schedule=schedule_for(env("SCHEDULE", "chaos")),
    hashbeat_http_port=os.environ.get("HASHBEAT_CHAOS_HTTP_PORT") or None,
)


@app.task(name=TASK)
def tick() -> None:
    """Never run: the chaos tests record messages, they start no worker."""


_publish_log_path = os.environ.get("HASHBEAT_CHAOS_PUBLISH_LOG")
if _publish_log_path:
    _publish_log = Path(_publish_log_path).open("a", buffering=1 << 16)  # noqa: SIM115 - lives as long as the beat
    atexit.register(_publish_log.close)

    @after_task_publish.connect(weak=False)
    def record_publish(headers: dict[str, Any] | None = None, **_: Any) -> None:
        """Publish time of every slot, written in the beat itself: enqueue lateness without
        the broker's and the consumer's share."""
        now = time.time()
        if headers and "hashbeat_slot" in headers:
            _publish_log.write(
                f"{headers['hashbeat_entry']}\t{headers['hashbeat_slot']}\t{now:.6f}\n"
            )


if os.environ.get("HASHBEAT_CHAOS_IDLE_THREAD") == "1":
    threading.Thread(target=threading.Event().wait, name="idle-like-sentry", daemon=True).start()
