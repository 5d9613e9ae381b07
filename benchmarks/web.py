"""The console's entries page with a large schedule: how long one request takes.

N entries (``--sizes``) are kept in the store of a private redis-server, hash-cron entries of a
few shapes, a tenth of them paused; the console (``celery_hashbeat.web.make_app``) is served by
waitress on a free port and asked over HTTP, as a browser asks: the entries page (its first page
of rows, after reading every entry and planning its next slot), a search by name, the state
filter, the table alone (what the page's self-refresh fetches) and one entry's page (its history
and spread). "cold" is the first request, which builds the plan the later ones keep while the
store's entries do not change (web/console.py's PlanCache); the others are medians of ``--runs``
requests each, after one warm-up request; "paused" is the entries page just after an entry was
paused (through ScheduleAdmin), which plans that entry again and keeps the rest; "changed" is
the first entries page after an entry's definition was changed (through ScheduleAdmin.update),
which rebuilds that entry in the kept plan as a beat does.

    python benchmarks/web.py [--sizes 1000,10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.control.definitions import encode
from celery_hashbeat.control.pause_and_trigger import Pause, encode_pause
from celery_hashbeat.store import open_store
from celery_hashbeat.store.controls import DEFINITION, PAUSE
from celery_hashbeat.web import make_app

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.redis_server import RedisProcess  # noqa: E402
from tests.support.serving import served  # noqa: E402

SHAPES = ("H * * * *", "H H * * *", "H/15 * * * *", "H H(0-5) * * 1-5")


def bench_task() -> None:
    """The task every entry names."""


def fill(url: str, prefix: str, size: int) -> None:
    store = open_store(url, prefix=prefix)
    for i in range(size):
        name = f"tenant-{i}-sync"
        definition = {"task": "bench.task", "schedule": hashcron(SHAPES[i % len(SHAPES)])}
        changes = {DEFINITION: encode(name, definition)}
        if i % 10 == 0:
            changes[PAUSE] = encode_pause(Pause(True, "benchmark", int(time.time() * 1000)))
        store.edit(name, changes)
    store.close()


def fetch(base: str, path: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(base + path, timeout=120) as answer:
        answer.read()
        assert answer.status == 200, (path, answer.status)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    pages = {
        "entries page": "/",
        "search by name": "/?q=tenant-4242",
        "paused only": "/?state=paused",
        "table (self-refresh)": "/?fragment=1",
        "one entry": "/entry?name=tenant-7-sync",
    }
    rows = []
    with RedisProcess() as redis:
        for size in (int(s) for s in options.sizes.split(",")):
            prefix = f"bench-web-{uuid.uuid4().hex[:8]}"
            fill(redis.url, prefix, size)
            app = Celery(f"bench-{prefix}", set_as_current=False, broker="memory://")
            app.conf.update(
                timezone="UTC",
                hashbeat_store_url=redis.url,
                hashbeat_key_prefix=prefix,
                beat_schedule={},
            )
            app.task(name="bench.task")(bench_task)
            console = make_app(app, token="bench")
            with served(console) as base:
                cold = fetch(base, "/")
                rows.append((size, "entries page, cold", cold, cold))
                for label, path in pages.items():
                    fetch(base, path)
                    times = [fetch(base, path) for _ in range(options.runs)]
                    rows.append((size, label, statistics.median(times), max(times)))
                after = []
                for run in range(options.runs):
                    console.admin.pause(f"tenant-{run * 10 + 1}-sync", "benchmark")
                    after.append(fetch(base, "/"))
                rows.append((size, "entries page, paused", statistics.median(after), max(after)))
                changed = []
                for run in range(options.runs):
                    shape = SHAPES[(run * 10 + 3 + 1) % len(SHAPES)]
                    console.admin.update(f"tenant-{run * 10 + 3}-sync", schedule=hashcron(shape))
                    changed.append(fetch(base, "/"))
                rows.append(
                    (size, "entries page, changed", statistics.median(changed), max(changed))
                )
            console.admin.close()
    print(f"{'entries':>8}  {'request':<22} {'median s':>9} {'max s':>7}")
    for size, label, median, most in rows:
        print(f"{size:>8}  {label:<22} {median:>9.3f} {most:>7.3f}")


if __name__ == "__main__":
    main()
