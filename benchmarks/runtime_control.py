"""Runtime control benchmark: changing a large schedule while the beat leads, beside RedBeat.

For each size N, N entries are kept in the store (celery_hashbeat: ``ScheduleAdmin``'s stored
entries; RedBeat: ``RedBeatSchedulerEntry.save()``), a leading scheduler runs on a private
redis-server, and then one entry at a time is added. Measured, medians over the changes:

- add: the operator's call (celery_hashbeat validates the definition before it writes);
- seen after: from the add returning to the leader having the entry planned (celery_hashbeat:
  polled every 0.5 s; RedBeat: its next tick, which comes when its own schedule says);
- apply: the leader's cost of taking one change in, against what reading every stored entry
  again would cost (the re-read column), so a change costs what it changes, not what is stored;
- startup: the first tick of a new leader, reading all N.

The publish is stubbed (a counter); Redis is real.

    python benchmarks/runtime_control.py [--sizes 1000,10000] [--changes 20]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from celery import Celery
from celery.schedules import crontab
from redbeat import RedBeatSchedulerEntry

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.definitions import encode
from celery_hashbeat.control.polling import ControlState
from celery_hashbeat.store.controls import DEFINITION

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from beat_tick import HashbeatBench, RedBeatBench  # noqa: E402 - the same stubbed publish

from tests.support.redis_server import RedisProcess  # noqa: E402


def make_app(redis_url: str, prefix: str) -> Celery:
    app = Celery(f"bench-{prefix}", set_as_current=False, broker="memory://")
    app.conf.update(
        timezone="UTC",
        beat_max_loop_interval=300,
        hashbeat_store_url=redis_url,
        hashbeat_key_prefix=prefix,
        redbeat_redis_url=redis_url,
        redbeat_key_prefix=f"{prefix}-redbeat",
        redbeat_lock_key=None,
        beat_schedule={},
    )
    app.task(name="bench.task")(bench_task)
    return app


def bench_task() -> None:
    """The task every entry names."""


def timed(function: Callable[[], Any]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def until(condition: Callable[[], bool], tick: Callable[[], float], limit: float = 30) -> float:
    """Tick as beat's loop does until ``condition()``; the seconds it took."""
    started = time.perf_counter()
    while not condition():
        wait = tick()
        if time.perf_counter() - started > limit:
            raise RuntimeError("the change was never seen")
        time.sleep(min(max(wait, 0.0), 0.005))
    return time.perf_counter() - started


HOURLY = hashcron("H * * * *")


def planned(beat: Scheduler, name: str) -> bool:
    entry = beat.entries.get(name)
    return entry is not None and entry.slot is not None


def hashbeat(redis_url: str, n: int, changes: int) -> dict[str, float]:
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    app = make_app(redis_url, prefix)
    admin = ScheduleAdmin(app)
    store = admin.store
    for i in range(n):
        definition = {"task": "bench.task", "schedule": HOURLY}
        store.edit(f"stored-{i}", {DEFINITION: encode(f"stored-{i}", definition)})
    beat = HashbeatBench(app, lazy=True)
    beat.setup_schedule()
    startup = timed(lambda: until(lambda: len(beat.entries) >= n and beat.is_leader, beat.tick))
    applies: list[float] = []
    apply = beat.leadership.apply

    def measured_apply(*args: Any) -> None:
        started = time.perf_counter()
        apply(*args)
        if args[0].definitions:
            applies.append(time.perf_counter() - started)

    beat.leadership.apply = measured_apply  # type: ignore[method-assign]
    adds, seen = [], []
    for i in range(changes):
        name = f"added-{i}"
        adds.append(timed(lambda: admin.add(name, task="bench.task", schedule=HOURLY)))  # noqa: B023
        seen.append(until(lambda: planned(beat, name), beat.tick))  # noqa: B023
    # What a leader that read every stored entry again per change would pay (read and decode).
    reread = statistics.median(
        timed(lambda: ControlState().poll(store.changes(0))) for _ in range(3)
    )
    beat.close()
    admin.close()
    return {
        "add": statistics.median(adds),
        "seen": statistics.median(seen),
        "apply": statistics.median(applies),
        "reread": reread,
        "startup": startup,
    }


def redbeat(redis_url: str, n: int, changes: int) -> dict[str, float]:
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    app = make_app(redis_url, prefix)
    for i in range(n):
        RedBeatSchedulerEntry(f"stored-{i}", "bench.task", random_hourly(), app=app).save()
    beat = RedBeatBench(app, lazy=True)
    beat.setup_schedule()
    startup = timed(beat.tick)
    adds, applies = [], []
    for i in range(changes):
        entry = RedBeatSchedulerEntry(f"added-{i}", "bench.task", random_hourly(), app=app)
        adds.append(timed(entry.save))
        # RedBeat plans nothing: each tick reads the entries due from Redis, so a change costs
        # nothing until it is due, and every tick costs a read of what is due.
        applies.append(timed(beat.tick))
    return {
        "add": statistics.median(adds),
        "seen": float("nan"),
        "apply": statistics.median(applies),
        "reread": float("nan"),
        "startup": startup,
    }


def random_hourly() -> crontab:
    """An hourly crontab at a random minute, RedBeat's way to spread (it has no hash)."""
    return crontab(minute=str(random.randrange(60)))


def shown(value: float, spec: str) -> str:
    return "n/a" if math.isnan(value) else format(value, spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--changes", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    server = RedisProcess().start()
    try:
        print(f"{args.changes} changes per row; medians; publish stubbed, Redis real")
        header = (
            f"{'scheduler':18} {'N':>7} {'add ms':>8} {'seen after ms':>14} "
            f"{'apply ms':>9} {'re-read ms':>11} {'startup s':>10}"
        )
        print(header)
        print("-" * len(header))
        for n in sizes:
            for name, run in (("celery_hashbeat", hashbeat), ("RedBeat", redbeat)):
                row = run(server.url, n, args.changes)
                print(
                    f"{name:18} {n:>7} {row['add'] * 1e3:>8.2f} "
                    f"{shown(row['seen'] * 1e3, '.0f'):>14} "
                    f"{row['apply'] * 1e3:>9.2f} {shown(row['reread'] * 1e3, '.1f'):>11} "
                    f"{row['startup']:>10.2f}"
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
