"""Beat tick benchmark: celery_hashbeat's Scheduler beside celery.beat.Scheduler and RedBeat.

The same entries run on the same simulated clock in one process; the broker publish is stubbed (a
counter) and Redis is real (our store, RedBeat's schedule). celery_hashbeat also runs on a real
PostgreSQL store (a private server started for the run, or ``--postgres-url``; the row is left out
with the reason where none can be started). For each size N it measures:

- startup: construction plus the first tick (load the schedule, take the lease, fill the heap);
- idle tick: one tick when nothing is due;
- per due entry: the scheduler's own cost per enqueued slot, fencing included, publish excluded;
- drain: the time to enqueue one minute's due entries (every entry fires once a minute);
- memory per entry: Python allocations of the scheduler (tracemalloc), the config excluded.

A peer whose run would take many minutes is measured within a time budget (or at a smaller N) and
extrapolated by its own cost model; such cells are marked with "~". docs/design.md §7 sets the
bars for celery_hashbeat at N = 100,000: startup 2 s, idle tick 100 us, 50 us per due entry,
1 KiB per entry.

    python benchmarks/beat_tick.py [--sizes 100,1000,10000,100000] [--budget 10] [--redis-url URL]
                                   [--metrics] [--only-hashbeat] [--kinds crontab,hashcron,balanced]
                                   [--postgres-url URL | --no-postgres]

A million entries: ``--sizes 1000000 --only-hashbeat --kinds hashcron``.

``--metrics`` runs celery_hashbeat with its HTTP endpoints on (``hashbeat_http_port=0``, any free
port), so every slot also updates the Prometheus metrics; the history is written either way.
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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from celery.beat import Scheduler as CeleryScheduler
from celery.schedules import crontab
from redbeat import RedBeatScheduler

from celery_hashbeat import Scheduler, hashcron

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from celery_hashbeat.store.postgres.schema import KINDS as PG_TABLES  # noqa: E402
from celery_hashbeat.store.postgres.schema import quote  # noqa: E402
from tests.support.postgres import PostgresServer, missing_reason  # noqa: E402
from tests.support.redis_server import RedisProcess  # noqa: E402

T0 = 1_893_456_000.0  # 2030-01-01T00:00:00Z, a whole minute
BARS = {"startup": 2.0, "idle": 100.0, "per_entry": 50.0, "memory": 1024.0}


class Clock:
    """The simulated wall clock every scheduler reads."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now

    def datetime(self) -> datetime:
        return datetime.fromtimestamp(self.now, timezone.utc)


@dataclass
class Peer:
    """One scheduler under test: how to build it, and how its costs grow with N."""

    name: str
    build: Callable[[Celery, Clock], Any]
    cap: int  # the largest N actually run; larger ones are extrapolated
    idle_grows: bool  # idle tick is O(N)
    dispatch_grows: bool  # each dispatch is O(N)
    store: str = "redis"  # celery_hashbeat's store: "redis" or "postgres"


@dataclass
class Kind:
    """The entries: every one fires once a minute; ``due_seconds`` are the seconds at which any
    falls due (the clock skips the others, so idle ticks are not counted as dispatch cost)."""

    schedule: Callable[[], Any]
    due_seconds: range


CRONTAB = Kind(crontab, range(60, 61))  # all due at the top of the minute
HASHCRON = Kind(lambda: hashcron("H * * * * *"), range(1, 61))  # spread over the minute
#: The same, dealt out evenly over the minute (docs/design.md §16): one group of N entries.
BALANCED = Kind(lambda: hashcron("H * * * * *", balanced=True), range(1, 61))


class HashbeatBench(Scheduler):
    sent = 0

    def send(self, entry: Any, task_id: str, when: str) -> None:
        self.sent += 1


class CeleryBench(CeleryScheduler):
    producer = None
    sent = 0

    def send_task(self, *args: Any, **kwargs: Any) -> None:
        self.sent += 1


class RedBeatBench(RedBeatScheduler):
    producer = None
    sent = 0

    def send_task(self, *args: Any, **kwargs: Any) -> None:
        self.sent += 1


def build_hashbeat(app: Celery, clock: Clock) -> HashbeatBench:
    scheduler = HashbeatBench(app, lazy=True)
    scheduler.clock = clock
    scheduler.setup_schedule()
    return scheduler


#: Set by --metrics: hashbeat_http_port for celery_hashbeat (0: any free port), or None.
HTTP_PORT: int | None = None


def make_app(
    redis_url: str, prefix: str, clock: Clock, schedule: Callable[[], Any], n: int, store_url: str
) -> Celery:
    app = Celery(f"bench-{prefix}", set_as_current=False, broker="memory://")
    app.conf.update(
        timezone="UTC",
        result_expires=None,
        beat_max_loop_interval=300,
        hashbeat_store_url=store_url,
        hashbeat_key_prefix=prefix,
        hashbeat_http_port=HTTP_PORT,
        redbeat_redis_url=redis_url,
        redbeat_key_prefix=f"{prefix}-redbeat",
        redbeat_lock_key=None,
        beat_schedule={
            f"entry-{i}": {"task": "bench.task", "schedule": schedule()} for i in range(n)
        },
    )
    app.now = clock.datetime  # type: ignore[method-assign]  # Celery's schedules read the clock
    return app


def drain_minute(
    scheduler: Any, clock: Clock, seconds: range, budget: float
) -> tuple[float, int, bool]:
    """Move the clock to each second of the minute at which slots fall due, ticking until nothing
    is due. Returns (elapsed, dispatched, finished)."""
    started = time.perf_counter()
    for second in seconds:
        clock.now = T0 + second
        while scheduler.tick() == 0:
            if time.perf_counter() - started > budget:
                return time.perf_counter() - started, scheduler.sent, False
    return time.perf_counter() - started, scheduler.sent, True


def idle_tick(scheduler: Any, clock: Clock, budget: float) -> float:
    clock.now = T0 + 0.5
    scheduler.tick()
    count, started = 0, time.perf_counter()
    while count < 20_000 and (count < 3 or time.perf_counter() - started < budget / 10):
        scheduler.tick()
        count += 1
    return (time.perf_counter() - started) / count * 1e6


def measure(peer: Peer, n: int, kind: Kind, urls: dict[str, str], budget: float) -> dict[str, Any]:
    """One scheduler at one size; the cells it could not run fully are extrapolated."""
    run_n = min(n, peer.cap)
    scale = n / run_n
    prefix = f"bench-{uuid.uuid4().hex[:10]}"
    result: dict[str, Any] = {"estimated": set()}
    redis_url, store_url = urls["redis"], urls[peer.store]
    try:
        clock = Clock()
        app = make_app(redis_url, prefix, clock, kind.schedule, run_n, store_url)
        gc.collect()
        started = time.perf_counter()
        scheduler = peer.build(app, clock)
        scheduler.tick()
        result["startup"] = (time.perf_counter() - started) * scale
        result["idle"] = idle_tick(scheduler, clock, budget) * (scale if peer.idle_grows else 1)
        elapsed, sent, finished = drain_minute(scheduler, clock, kind.due_seconds, budget)
        per_entry = elapsed / max(sent, 1) * 1e6
        result["per_entry"] = per_entry * (scale if peer.dispatch_grows else 1)
        result["drain"] = result["per_entry"] * n / 1e6
        if scale > 1:
            result["estimated"] |= {"startup", "per_entry", "drain"}
            result["estimated"] |= {"idle"} if peer.idle_grows else set()
        if not finished:
            result["estimated"] |= {"per_entry", "drain"}
        scheduler.close()
        del scheduler

        clock = Clock()
        app = make_app(redis_url, f"{prefix}-m", clock, kind.schedule, run_n, store_url)
        gc.collect()
        tracemalloc.start()
        scheduler = peer.build(app, clock)
        scheduler.tick()
        result["memory"] = tracemalloc.get_traced_memory()[0] / run_n
        tracemalloc.stop()
        scheduler.close()
    finally:
        client = redis.Redis.from_url(redis_url)
        for key in client.scan_iter(match=f"*{prefix}*", count=10_000):
            client.delete(key)
        client.close()
        if peer.store == "postgres":
            drop_tables(store_url, [prefix, f"{prefix}-m"])
    return result


def drop_tables(url: str, prefixes: list[str]) -> None:
    """The PostgreSQL store's tables of ``prefixes`` (docs/settings.md: one set per prefix)."""
    import psycopg  # noqa: PLC0415 - only with a PostgreSQL row

    with psycopg.connect(url, autocommit=True) as conn:
        for prefix in prefixes:
            for table in PG_TABLES:
                conn.execute(f"DROP TABLE IF EXISTS {quote(f'{prefix}_{table}')}")  # type: ignore[arg-type]


def cell(result: dict[str, Any], name: str, fmt: str) -> str:
    mark = "~" if name in result["estimated"] else ""
    return mark + format(result[name], fmt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--budget", type=float, default=10.0, help="seconds per peer drain")
    parser.add_argument("--redbeat-cap", type=int, default=10_000)
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("HASHBEAT_TEST_REDIS_URL"),
        help="a Redis to use; by default a private redis-server is started (and stopped)",
    )
    parser.add_argument(
        "--postgres-url",
        help="a PostgreSQL database for the PostgreSQL row; by default a private server is "
        "started (and stopped), or the row is left out if none can be",
    )
    parser.add_argument("--no-postgres", action="store_true", help="leave out the PostgreSQL row")
    parser.add_argument(
        "--metrics", action="store_true", help="celery_hashbeat with /metrics served and updated"
    )
    parser.add_argument(
        "--only-hashbeat", action="store_true", help="leave out the peers (Celery, RedBeat)"
    )
    parser.add_argument(
        "--kinds",
        default="crontab,hashcron,balanced",
        help="celery_hashbeat's rows to run (a million crontab objects in the configuration "
        "alone take gigabytes, Celery's objects, not the scheduler's)",
    )
    args = parser.parse_args()
    global HTTP_PORT  # noqa: PLW0603 - one switch for every app the run makes
    HTTP_PORT = 0 if args.metrics else None
    private = None
    if args.redis_url is None:
        private = RedisProcess().start()
        args.redis_url = private.url
    postgres = None
    if args.postgres_url is None and not args.no_postgres:
        reason = missing_reason()
        if reason is None:
            postgres = PostgresServer()
            args.postgres_url = postgres.url(postgres.create_database())
        else:
            print(f"no PostgreSQL row: {reason}")
    try:
        run(args)
    finally:
        if private is not None:
            private.stop()
        if postgres is not None:
            postgres.close()


def run(args: argparse.Namespace) -> None:
    warnings.simplefilter("ignore")
    big = 10**9
    peers = [
        ("celery_hashbeat (crontab)", Peer("hashbeat", build_hashbeat, big, False, False), CRONTAB),
        (
            "celery_hashbeat (hashcron)",
            Peer("hashbeat", build_hashbeat, big, False, False),
            HASHCRON,
        ),
        (
            "celery_hashbeat (balanced)",
            Peer("hashbeat", build_hashbeat, big, False, False),
            BALANCED,
        ),
        (
            "celery_hashbeat (hashcron, PostgreSQL)",
            Peer("hashbeat", build_hashbeat, big, False, False, store="postgres"),
            HASHCRON,
        ),
        (
            "celery.beat.Scheduler",
            Peer("celery", lambda app, _: CeleryBench(app), big, True, True),
            CRONTAB,
        ),
        (
            "RedBeatScheduler",
            Peer("redbeat", lambda app, _: RedBeatBench(app), args.redbeat_cap, False, False),
            CRONTAB,
        ),
    ]
    if args.only_hashbeat:
        peers = [peer for peer in peers if peer[0].startswith("celery_hashbeat")]
    kinds = {f"celery_hashbeat ({kind})" for kind in args.kinds.split(",")}
    if args.postgres_url is not None:
        kinds.add("celery_hashbeat (hashcron, PostgreSQL)")
    peers = [
        peer for peer in peers if not peer[0].startswith("celery_hashbeat") or peer[0] in kinds
    ]
    urls = {"redis": args.redis_url, "postgres": args.postgres_url or ""}
    header = (
        f"{'scheduler':<40}{'N':>8}{'startup s':>12}{'idle tick us':>14}"
        f"{'per due us':>12}{'drain 1 min s':>15}{'mem B/entry':>13}"
    )
    print(header)
    print("-" * len(header))
    ours: dict[str, Any] = {}
    for n in (int(size) for size in args.sizes.split(",")):
        for label, peer, kind in peers:
            result = measure(peer, n, kind, urls, args.budget)
            if label.startswith("celery_hashbeat") and n == 100_000:
                ours[label] = result
            print(
                f"{label:<40}{n:>8}{cell(result, 'startup', '.3f'):>12}"
                f"{cell(result, 'idle', '.1f'):>14}{cell(result, 'per_entry', '.1f'):>12}"
                f"{cell(result, 'drain', '.2f'):>15}{cell(result, 'memory', '.0f'):>13}",
                flush=True,
            )
    print(
        "\n~ extrapolated: celery.beat.Scheduler's drain is cut at the time budget and scaled "
        "(each dispatch is O(N));\n  RedBeat runs at most --redbeat-cap entries and is scaled "
        "linearly. Publishing is stubbed everywhere; Redis and PostgreSQL are real."
    )
    for label, result in ours.items():
        verdicts = ", ".join(
            f"{name} {'ok' if result[name] <= bar else 'OVER'} ({result[name]:.3g} vs {bar:g})"
            for name, bar in BARS.items()
        )
        print(f"docs/design.md §7 bars at N=100,000, {label}: {verdicts}")


if __name__ == "__main__":
    main()
