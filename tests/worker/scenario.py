"""Real workers and beats for the worker scenarios, and the record their tasks leave.

A Scenario owns a private redis-server (broker, store and record at once), the processes it
starts and their logs. Tasks record their own runs (tests/worker/app.py), so every check reads
what the workers did, not what the beat says it did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import redis

from celery_hashbeat.store import Store, open_store
from tests.support.processes import ROOT, Process, ProcessGroup, celery_beat_args, wait_until
from tests.support.redis_server import RedisProcess

APP = "tests.worker.app"


@dataclass(frozen=True)
class Run:
    """One task run as the task recorded it; ``end`` is None for one that never finished."""

    entry: str
    slot: float  # seconds since the epoch
    task_id: str
    host: str
    start: float
    end: float | None


class Scenario:
    def __init__(self, workdir: Path, schedule: str) -> None:
        self.workdir = workdir
        self.redis = RedisProcess().start()
        self.prefix = f"hashbeat-workers-{uuid.uuid4().hex[:8]}"
        self.env = {
            "HASHBEAT_WORKERS_REDIS": self.redis.url,
            "HASHBEAT_WORKERS_PREFIX": self.prefix,
            "HASHBEAT_WORKERS_SCHEDULE": schedule,
        }
        self.processes = ProcessGroup(workdir)
        self.store: Store = open_store(self.redis.url, prefix=self.prefix)
        self.client = redis.Redis.from_url(self.redis.url, decode_responses=True)

    def worker(
        self, node: str, queues: str = "", concurrency: int = 4, wait: bool = True
    ) -> Process:
        """``celery worker -n node -c concurrency`` (prefork), started and, with ``wait``,
        ready."""
        name = node.partition("@")[0]
        args = [
            sys.executable, "-m", "celery", "-A", APP, "worker", "-n", node, "-P", "prefork",
            "-c", str(concurrency), "--loglevel=INFO", "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        if queues:
            args += ["-Q", queues]
        process = self.processes.start(f"worker-{name}", args, self.env)
        if wait:
            self.ready(process, node)
        return process

    def ready(self, process: Process, node: str) -> None:
        assert wait_until(lambda: f"{node} ready." in self.log(process), 60), self.log(process)

    def beat(self, name: str) -> Process:
        return self.processes.start(name, celery_beat_args(APP, self.workdir, name), self.env)

    def hashbeat(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``hashbeat ARGS -A tests.worker.app`` as an operator types it, on this scenario's
        store."""
        return subprocess.run(
            [str(Path(sys.executable).parent / "hashbeat"), *args, "-A", APP],
            cwd=ROOT,
            env={**os.environ, **self.env, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def log(self, process: Process) -> str:
        return process.log.read_text(errors="replace") if process.log.exists() else ""

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.client.lrange(f"{self.prefix}:runs", 0, -1)]

    def runs(self) -> dict[str, list[Run]]:
        """Every run of a slot recorded so far, per entry, in order of start (triggered runs,
        which have no slot, are left out)."""
        events: dict[str, dict[str, float]] = defaultdict(dict)
        first: dict[str, dict[str, str | float]] = {}
        for record in self.records():
            if record.get("slot") is None:
                continue
            # A retried task records a second start: its run spans from the first.
            events[record["task_id"]].setdefault(record["event"], record["at"])
            first.setdefault(record["task_id"], record)
        by_entry: dict[str, list[Run]] = defaultdict(list)
        for task_id, record in first.items():
            slot = datetime.fromisoformat(str(record["slot"])).timestamp()
            seen = events[task_id]
            run = Run(str(record["entry"]), slot, task_id, str(record["host"]), seen["start"],
                      seen.get("end"))  # fmt: skip
            by_entry[run.entry].append(run)
        return {entry: sorted(runs, key=lambda run: run.start) for entry, runs in by_entry.items()}

    def diagnostics(self) -> str:
        return "\n".join(
            f"--- {process.name} ---\n{process.log_tail(60)}" for process in self.processes.started
        )

    def close(self) -> None:
        self.processes.reap()
        self.store.close()
        self.client.close()
        self.redis.stop()
