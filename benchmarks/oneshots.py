"""One-shots at scale (docs/design.md §21): what N pending ``at`` entries cost a beat.

    python benchmarks/oneshots.py [--sizes 0,1000,10000,100000] [--redis-url URL]

Each run builds celery_hashbeat's Scheduler on a simulated clock with N one-shots pending (their
instants spread over the next 30 days) beside 100 entries due every second, on a real Redis store
(a private redis-server unless --redis-url is given), the broker publish stubbed (a counter), as
benchmarks/beat_tick.py does. It reports:

- startup: construction plus the first tick;
- memory per one-shot: the scheduler's Python allocations (tracemalloc) with N one-shots, less
  those with none, over N (the configuration itself excluded); the bar is 1 KiB;
- idle tick: one tick when nothing is due, once startup's leftovers are collected (flat in N is
  the bar);
- every second: the scheduler's cost per due slot of the 100 every-second entries over 10
  seconds, and whether each second's 100 went out in that second's ticks.

A report, never a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc
import uuid
import warnings
from pathlib import Path
from typing import Any

import redis
from celery import Celery

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from beat_tick import T0, Clock, build_hashbeat  # noqa: E402

from celery_hashbeat import at, hashcron  # noqa: E402
from celery_hashbeat.expr.slots import to_datetime  # noqa: E402
from tests.support.redis_server import RedisProcess  # noqa: E402

EVERY_SECOND = 100
SPREAD_MS = 30 * 86_400_000


def make_app(redis_url: str, prefix: str, clock: Clock, n: int) -> Celery:
    app = Celery(f"bench-{prefix}", set_as_current=False, broker="memory://")
    schedule: dict[str, Any] = {
        f"tick-{i}": {"task": "bench.tick", "schedule": hashcron("* * * * * *")}
        for i in range(EVERY_SECOND)
    }
    start = int(T0 * 1000) + 3_600_000
    for i in range(n):
        when = to_datetime(start + i * SPREAD_MS // max(n, 1)).isoformat()
        schedule[f"once-{i}"] = {"task": "bench.once", "schedule": at(when)}
    app.conf.update(
        timezone="UTC",
        result_expires=None,
        beat_max_loop_interval=300,
        hashbeat_store_url=redis_url,
        hashbeat_key_prefix=prefix,
        beat_schedule=schedule,
    )
    app.now = clock.datetime  # type: ignore[method-assign]
    return app


def idle_tick(scheduler: Any, clock: Clock) -> float:
    """us per tick with nothing due: the fastest of five rounds of 1,000, after 2,000 ticks of
    warming up (the collector's first passes over what startup made are not a tick's cost)."""
    clock.now = T0 + 0.5
    for _ in range(2_000):
        scheduler.tick()
    rounds = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(1_000):
            scheduler.tick()
        rounds.append((time.perf_counter() - started) / 1_000 * 1e6)
    return min(rounds)


def every_second(scheduler: Any, clock: Clock) -> tuple[float, bool]:
    """us per due slot over 10 seconds, and whether every second's slots went out in it."""
    on_time, spent = True, 0.0
    for second in range(1, 11):
        before = scheduler.sent
        clock.now = T0 + second
        started = time.perf_counter()
        while scheduler.tick() == 0:
            pass
        spent += time.perf_counter() - started
        on_time &= scheduler.sent - before == EVERY_SECOND
    return spent / (10 * EVERY_SECOND) * 1e6, on_time


def measure(n: int, redis_url: str, baseline: float | None) -> dict[str, Any]:
    prefix = f"bench-{uuid.uuid4().hex[:10]}"
    result: dict[str, Any] = {}
    try:
        clock = Clock()
        app = make_app(redis_url, prefix, clock, n)
        gc.collect()
        started = time.perf_counter()
        scheduler = build_hashbeat(app, clock)
        scheduler.tick()
        result["startup"] = time.perf_counter() - started
        result["idle"] = idle_tick(scheduler, clock)
        result["per_due"], result["on_time"] = every_second(scheduler, clock)
        scheduler.close()
        del scheduler

        clock = Clock()
        app = make_app(redis_url, f"{prefix}-m", clock, n)
        gc.collect()
        tracemalloc.start()
        scheduler = build_hashbeat(app, clock)
        scheduler.tick()
        result["memory"] = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        scheduler.close()
    finally:
        client = redis.Redis.from_url(redis_url)
        for key in client.scan_iter(match=f"*{prefix}*", count=10_000):
            client.delete(key)
        client.close()
    result["per_oneshot"] = (
        None if baseline is None or n == 0 else ((result["memory"] - baseline) / n)
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0,1000,10000,100000")
    parser.add_argument("--redis-url", default=os.environ.get("HASHBEAT_TEST_REDIS_URL"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    private = None
    if args.redis_url is None:
        private = RedisProcess().start()
        args.redis_url = private.url
    try:
        header = (
            f"{'pending one-shots':>18}{'startup s':>11}{'B/one-shot':>12}{'idle tick us':>14}"
            f"{'every-second us/slot':>22}{'on time':>9}"
        )
        print(header)
        print("-" * len(header))
        baseline = None
        for n in [int(size) for size in args.sizes.split(",")]:
            result = measure(n, args.redis_url, baseline)
            if n == 0:
                baseline = result["memory"]
            per = "-" if result["per_oneshot"] is None else f"{result['per_oneshot']:.0f}"
            print(
                f"{n:>18,}{result['startup']:>11.2f}{per:>12}{result['idle']:>14.1f}"
                f"{result['per_due']:>22.1f}{'yes' if result['on_time'] else 'NO':>9}"
            )
    finally:
        if private is not None:
            private.stop()


if __name__ == "__main__":
    main()
