"""Real subprocesses for multi-process tests and benchmarks.

Each process runs in a process group of its own with its output in a log file, and a
ProcessGroup reaps everything it started (SIGCONT, then SIGKILL to the whole group), so a failing
test never leaves a beat behind, even one it had frozen with SIGSTOP.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Process:
    """One subprocess: signals by name, a log file to read back, and a reaper that always works."""

    def __init__(
        self, name: str, args: Sequence[str], log: Path, env: Mapping[str, str] | None = None
    ) -> None:
        self.name = name
        self.args = list(args)
        self.log = log
        self.env = dict(env or {})
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        environ = {**os.environ, **self.env}
        environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
        )
        with self.log.open("ab") as log:
            self._popen = subprocess.Popen(
                self.args,
                cwd=ROOT,
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: reaped as one
            )
        return self

    @property
    def popen(self) -> subprocess.Popen[bytes]:
        assert self._popen is not None, f"{self.name} was never started"
        return self._popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def send(self, sig: signal.Signals) -> None:
        """Deliver ``sig`` to the process itself (not its group), as a supervisor or the OOM
        killer would."""
        if self.alive:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send(signal.SIGKILL)
        self.wait(10)

    def terminate(self) -> None:
        self.send(signal.SIGTERM)

    def pause(self) -> None:
        self.send(signal.SIGSTOP)

    def resume(self) -> None:
        self.send(signal.SIGCONT)

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if it is still running after ``timeout`` seconds."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def reap(self) -> None:
        """Kill the whole process group, however it was left (running, stopped or gone)."""
        if self._popen is None:
            return
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.killpg(self._popen.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
        self.wait(10)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        state = "running" if self.alive else f"exited {self._popen and self._popen.poll()}"
        pid = self._popen.pid if self._popen else None
        return f"<{self.name} pid={pid} {state} log={self.log}>"


class ProcessGroup:
    """Every process a test or benchmark started, reaped together at the end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[Process] = []

    def start(
        self, name: str, args: Sequence[str], env: Mapping[str, str] | None = None
    ) -> Process:
        process = Process(name, args, self.workdir / f"{name}.log", env)
        self.started.append(process)
        return process.start()

    def reap(self) -> None:
        for process in self.started:
            process.reap()

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.reap()


def celery_beat_args(
    app: str,
    workdir: Path,
    name: str,
    scheduler: str = "celery_hashbeat.Scheduler",
    loglevel: str = "INFO",
) -> list[str]:
    """``celery -A app beat -S scheduler`` with its own pidfile and schedule file."""
    return [
        sys.executable, "-m", "celery", "-A", app, "beat",
        "-S", scheduler,
        f"--loglevel={loglevel}",
        f"--pidfile={workdir / f'{name}.pid'}",
        f"--schedule={workdir / f'{name}.schedule'}",
    ]  # fmt: skip


def wait_until(condition: Callable[[], object], timeout: float, interval: float = 0.02) -> bool:
    """Poll ``condition()`` until it is truthy or ``timeout`` seconds pass; say which."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
