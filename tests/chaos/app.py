"""The Celery app the chaos beats run, configured from the environment by the test that starts
them (``celery -A tests.chaos.app beat -S celery_hashbeat.Scheduler``).

Environment: ``HASHBEAT_CHAOS_BROKER``, ``HASHBEAT_CHAOS_STORE``, ``HASHBEAT_CHAOS_PREFIX``,
``HASHBEAT_CHAOS_QUEUE``, ``HASHBEAT_CHAOS_TTL`` (seconds), ``HASHBEAT_CHAOS_CATCH_UP``,
``HASHBEAT_CHAOS_SCHEDULE`` (a name from ``schedule_for``), ``HASHBEAT_CHAOS_HTTP_PORT`` (serve
/metrics and the probes there; unset: no HTTP) and, optionally,
``HASHBEAT_CHAOS_CONFIRMS=1`` turns publisher confirms on (RabbitMQ's ``confirm_publish``), and
``HASHBEAT_CHAOS_PUBLISH_LOG``: a file where the beat appends ``entry, slot, publish time`` after
every publish, for the punctuality benchmark; ``HASHBEAT_CHAOS_IDLE_THREAD=1`` starts an idle thread
at import, as error trackers and metrics exporters do (a signal may then reach any thread).
``HASHBEAT_CHAOS_HOOKED=1`` wraps Celery's ``Scheduler.apply_entry`` as Sentry's integration does,
so every slot goes through the hook; ``HASHBEAT_CHAOS_CLOCK_FILE`` names a file holding a clock
offset in seconds, read on SIGUSR2: the beat's wall clock steps by it (a clock a test must move is
the one thing not real here).
"""

from __future__ import annotations

import atexit
import os
import signal
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
    hashed interval, so a new leader always has a slot due within a quarter second); ``backfill``
    (chaos plus an entry the test keeps paused, ``BACKFILLED``); ``long-backfill`` (one entry every
    second, and ``DENSE``, kept paused, every 5 ms); ``burst:N``
    (N entries every second, all at once); ``wave:N`` (N entries every 5 seconds, all at once);
    ``spread-cron:N`` (N entries ``H * * * * *``, once a
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
    if kind == "bad-exchange":
        # Beside a good entry, one whose messages name an exchange the broker does not have
        # (with a routing key: a direct exchange without one is Celery's default exchange).
        return {
            "every-second": {"task": TASK, "schedule": hashcron("*/1 * * * * *")},
            "bad-exchange": {
                "task": TASK,
                "schedule": hashcron("*/1 * * * * *"),
                "options": {"exchange": "no-such-exchange", "routing_key": "nowhere"},
            },
        }
    if kind == "burst":
        return {
            f"burst-{i}": {"task": TASK, "schedule": hashcron("* * * * * *")}
            for i in range(int(count))
        }
    if kind == "per-message":
        # An option the batch's plans do not cover sends every slot through apply_async.
        return {
            name: {**spec, "options": {"shadow": f"shadow-{name}"}}
            for name, spec in chaos_schedule().items()
        }
    if kind == "overlap":
        # Every slot claimed with its run lease (docs/design.md §12), taking it over from the run
        # before (no worker runs to end it): "replace" sends every slot, so the judge can ask
        # for all of them, where "skip" would rightly drop those of a catch-up burst.
        return {name: {**spec, "overlap": "replace"} for name, spec in chaos_schedule().items()}
    if kind == "fan-out":
        # One copy per named worker, each to that worker's direct queue (docs/design.md §11).
        return {
            "fanned": {
                "task": TASK,
                "schedule": hashcron("*/1 * * * * *"),
                "workers": list(FANNED_NODES),
            },
            "every-second": {"task": TASK, "schedule": hashcron("*/1 * * * * *")},
        }
    if kind == "stored":
        return {}  # the test stores the entries as definitions
    if kind == "backfill":
        # Beside the chaos entries, one the test pauses before any beat starts: only backfills
        # send its slots.
        return {
            **chaos_schedule(),
            BACKFILLED: {"task": TASK, "schedule": hashcron("*/1 * * * * *")},
        }
    if kind == "long-backfill":
        # One entry that keeps the leader steady, and one the test pauses before any beat
        # starts, with 200 slots a second: ten seconds of it make a backfill of several turns.
        return {
            "every-second": {"task": TASK, "schedule": hashcron("*/1 * * * * *")},
            DENSE: {"task": TASK, "schedule": hashinterval(0.005)},
        }
    if kind == "wave":
        return {
            f"wave-{i}": {"task": TASK, "schedule": hashcron("*/5 * * * * *")}
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


#: The ``backfill`` schedule's paused entry, whose slots only backfills send.
BACKFILLED = "paused-1s"

#: The ``long-backfill`` schedule's paused entry, every 5 ms.
DENSE = "paused-5ms"

#: The worker nodes the ``fan-out`` schedule's entry is copied to.
FANNED_NODES = ("celery@chaos-1", "celery@chaos-2")


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
    worker_direct=True,
)
if env("CONFIRMS", "0") == "1":
    app.conf.broker_transport_options = {"confirm_publish": True}


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


_clock_file = os.environ.get("HASHBEAT_CHAOS_CLOCK_FILE")
if _clock_file:
    _offset_s = [0.0]
    _real_time = time.time

    def _stepped_time() -> float:
        return _real_time() + _offset_s[0]

    def _step_clock(signum: int, frame: object) -> None:
        _offset_s[0] = float(Path(str(_clock_file)).read_text() or 0)

    time.time = _stepped_time  # read by the scheduler as it starts (Scheduler.clock)
    signal.signal(signal.SIGUSR2, _step_clock)


if os.environ.get("HASHBEAT_CHAOS_HOOKED") == "1":
    from celery import beat as celery_beat

    _apply_entry = celery_beat.Scheduler.apply_entry

    def _hooked_apply_entry(self: Any, entry: Any, producer: Any = None) -> Any:
        return _apply_entry(self, entry, producer=producer)

    celery_beat.Scheduler.apply_entry = _hooked_apply_entry  # type: ignore[method-assign]
