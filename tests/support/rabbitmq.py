"""A private RabbitMQ virtual host for a test, on the machine's broker at 127.0.0.1:5672.

The suite never shares broker state between tests: each test that needs RabbitMQ gets a vhost of
its own (made with ``rabbitmqctl``, the guest user given every permission on it) and the vhost is
deleted afterwards, queues, exchanges and all. Tests that need it are skipped, with the reason,
where no RabbitMQ answers or ``rabbitmqctl`` is missing.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

HOST, PORT = "127.0.0.1", 5672


def unavailable() -> str | None:
    """Why a private vhost cannot be made here, or None if it can."""
    if shutil.which("rabbitmqctl") is None:
        return "rabbitmqctl is not on PATH (RabbitMQ tests make a vhost of their own with it)"
    try:
        with socket.create_connection((HOST, PORT), timeout=1):
            pass
    except OSError as exc:
        return f"no RabbitMQ answers on {HOST}:{PORT} ({exc})"
    return None


def _ctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


@contextmanager
def private_vhost() -> Iterator[str]:
    """An AMQP URL (guest/guest) on a vhost made for the caller and deleted afterwards."""
    vhost = f"hashbeat-test-{uuid.uuid4().hex[:12]}"
    _ctl("add_vhost", vhost)
    try:
        _ctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
        yield f"amqp://guest:guest@{HOST}:{PORT}/{vhost}"
    finally:
        _ctl("delete_vhost", vhost)
