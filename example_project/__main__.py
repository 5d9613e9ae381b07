"""Run the example: one worker and two beats, their interesting lines interleaved.

    python -m example_project [--seconds 40] [--no-takeover] [--verbose]

Both beats run ``celery_hashbeat.Scheduler`` against one store: one leads and enqueues, the other
stands by. Halfway through, the leader is stopped cleanly and the standby takes over. At the end
the launcher counts what each beat sent and what the worker ran, and checks that no slot ran twice.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP = "example_project.proj"
INTERESTING = re.compile(r"^ran |beat: |Sending due task|ERROR|CRITICAL|Traceback")
RAN = re.compile(r"^ran \S+ for entry (\S+), slot (\S+)$")
LEADING = "enqueueing from now on"


@dataclass
class Child:
    """One celery process and what the launcher learned from its output."""

    name: str
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    sent: int = 0
    leading: bool = False
    #: Inside a traceback, whose last line (the error itself) is shown with its first.
    in_traceback: bool = False


def start(name: str, args: list[str], env: dict[str, str], verbose: bool) -> Child:
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", APP, *args],
        cwd=HERE.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
    )
    child = Child(name, process)
    threading.Thread(target=_follow, args=(child, verbose), daemon=True).start()
    return child


def _follow(child: Child, verbose: bool) -> None:
    assert child.process.stdout is not None
    for raw in child.process.stdout:
        line = _short(raw.rstrip())
        child.lines.append(line)
        if "Sending due task" in line:
            child.sent += 1
        if LEADING in line:
            child.leading = True
        elif "lease is held by" in line or "stepped down" in line:
            child.leading = False
        error_line = child.in_traceback and bool(line) and not line.startswith(" ")
        child.in_traceback = line.startswith("Traceback") or (child.in_traceback and not error_line)
        if verbose or error_line or INTERESTING.search(line):
            print(f"[{child.name:>7}] {line}", flush=True)


def _short(line: str) -> str:
    """Drop Celery's timestamp and process prefix: the launcher's own prefix names the process."""
    return re.sub(r"^\[[^\]]*\] ", "", line)


def stop(child: Child, timeout: float = 15.0) -> None:
    if child.process.poll() is None:
        child.process.send_signal(signal.SIGTERM)
        try:
            child.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait()


def wait_for_leader(beats: list[Child], deadline: float) -> Child | None:
    while time.monotonic() < deadline:
        for beat in beats:
            if beat.leading and beat.process.poll() is None:
                return beat
        time.sleep(0.1)
    return None


def broker_problem(env: dict[str, str]) -> str | None:
    """Why the broker the example would use cannot work from this Python, in one line; None
    when it can. Kombu's Redis transport needs more than ``pip install -e .`` installs."""
    if "REDIS_URL" not in env:
        return None
    try:
        import kombu.transport.redis  # noqa: F401, PLC0415 - only to check that it imports
    except ImportError as exc:
        return (
            f"example: REDIS_URL asks for a Redis broker, but kombu's Redis transport cannot be "
            f"imported ({exc}): install it with python -m pip install -e '.[redis]' (in a "
            f"project: pip install 'celery-hashbeat[redis]'), or unset REDIS_URL"
        )
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m example_project", description=__doc__)
    parser.add_argument("--seconds", type=float, default=40.0, help="how long to run (40)")
    parser.add_argument("--no-takeover", action="store_true", help="leave the leader running")
    parser.add_argument("--verbose", action="store_true", help="show every line of every process")
    options = parser.parse_args(argv)

    problem = broker_problem(dict(os.environ))
    if problem is not None:
        print(problem, flush=True)
        return 1
    data = Path(tempfile.mkdtemp(prefix="hashbeat-example-"))
    env = {**os.environ, "HASHBEAT_EXAMPLE_DIR": str(data), "PYTHONUNBUFFERED": "1"}
    where = f"Redis at {os.environ['REDIS_URL']}" if "REDIS_URL" in env else f"files in {data}"
    print(f"example: broker and store are {where}; running for {options.seconds:.0f}s", flush=True)
    quiet = ["--loglevel=INFO"]
    worker = start(
        "worker",
        ["worker", "--pool=solo", "--without-gossip", "--without-mingle", *quiet],
        env,
        options.verbose,
    )
    beats = [
        start(
            f"beat-{n}",
            [
                "beat",
                "-S",
                "celery_hashbeat.Scheduler",
                f"--pidfile={data / f'beat-{n}.pid'}",
                *quiet,
            ],
            env,
            options.verbose,
        )
        for n in (1, 2)
    ]
    children = [worker, *beats]
    started = time.monotonic()
    try:
        if not options.no_takeover:
            leader = wait_for_leader(beats, started + options.seconds / 2)
            time.sleep(max(0.0, started + options.seconds / 2 - time.monotonic()))
            if leader is not None:
                print(
                    f"example: stopping the leader, {leader.name}, to show a takeover", flush=True
                )
                stop(leader)
        time.sleep(max(0.0, started + options.seconds - time.monotonic()))
    except KeyboardInterrupt:
        print("example: interrupted", flush=True)
    finally:
        for child in reversed(children):
            stop(child)
        shutil.rmtree(data, ignore_errors=True)
    return summarize(worker, beats)


def summarize(worker: Child, beats: list[Child]) -> int:
    runs = Counter(m.groups() for line in worker.lines if (m := RAN.match(line)))
    twice = [slot for slot, count in runs.items() if count > 1]
    print("example: summary", flush=True)
    for beat in beats:
        print(f"  {beat.name} sent {beat.sent} tasks", flush=True)
    print(f"  worker ran {sum(runs.values())} tasks, {len(runs)} distinct slots", flush=True)
    if twice:
        print(f"  slots that ran twice: {twice}", flush=True)
        return 1
    if not runs:
        print("  nothing ran: see the lines above (or --verbose) for why", flush=True)
        return 1
    print("  no slot ran twice", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
