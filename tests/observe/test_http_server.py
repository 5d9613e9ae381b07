"""The HTTP endpoints' answers (celery_hashbeat/observe/http.py) on a real socket, with the one
fake the suite allows: the clock, to stop the tick loop without waiting 30 s."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from celery_hashbeat.observe.http import HealthServer, PortInUse
from celery_hashbeat.observe.metrics import Metrics
from celery_hashbeat.observe.watch import LIVENESS_FLOOR, Watch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def served(clock: Clock) -> Iterator[tuple[Watch, str]]:
    watch = Watch("host:1:ab", Metrics(entry_labels=True), max_wait=5.0, monotonic=clock)
    server = HealthServer(watch, "127.0.0.1", 0, lambda: {"role": "standby"}).start()
    host, port = server.address
    try:
        yield watch, f"http://{host}:{port}"
    finally:
        server.close()


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


def test_livez_fails_once_the_tick_loop_stops_turning(
    served: tuple[Watch, str], clock: Clock
) -> None:
    watch, base = served
    assert get(f"{base}/livez")[0] == 200
    clock.now += LIVENESS_FLOOR - 1
    assert get(f"{base}/livez")[0] == 200
    clock.now += 2
    code, body = get(f"{base}/livez")
    assert code == 503 and "has not turned for 31s" in body, body
    watch.ticked()
    assert get(f"{base}/livez")[0] == 200


def test_readyz_says_why_the_store_is_not_ready(served: tuple[Watch, str]) -> None:
    watch, base = served
    code, body = get(f"{base}/readyz")
    assert code == 503 and "has not been asked yet" in body
    watch.store_answered()
    assert get(f"{base}/readyz") == (200, "the store answers\n")
    watch.store_failed(TimeoutError("Redis store redis://h:6379/0 is not answering"))
    code, body = get(f"{base}/readyz")
    assert code == 503 and "redis://h:6379/0 is not answering" in body


def test_per_entry_labels_and_unknown_paths(served: tuple[Watch, str]) -> None:
    watch, base = served
    watch.sent("a", 1_000, "task-1", 1_004)
    watch.skipped("a", 2_000, "overlap", 2_000, "task-1")
    code, body = get(f"{base}/metrics")
    assert code == 200
    assert 'hashbeat_sent_total{entry="a"} 1.0' in body
    assert 'hashbeat_skipped_total{entry="a",reason="overlap"} 1.0' in body
    assert "hashbeat_send_lateness_seconds_bucket" in body
    assert get(f"{base}/status") == (200, '{\n  "role": "standby"\n}\n')
    code, body = get(f"{base}/nope")
    assert code == 404 and "/metrics, /livez, /readyz, /status" in body


def test_a_port_in_use_is_named_with_the_fix(clock: Clock) -> None:
    watch = Watch("host:1:ab", None, monotonic=clock)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUse) as caught:
            HealthServer(watch, "127.0.0.1", port, dict)
    assert str(caught.value) == (
        f"hashbeat_http_port: cannot listen on 127.0.0.1:{port} (the port is already in use by "
        "another process): stop that process, or set hashbeat_http_port to a free port"
    )
