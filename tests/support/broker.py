"""A recorder of what the beats really enqueued: a kombu consumer on the real broker.

It drains one Celery queue in a thread and keeps, for every message, the hashbeat headers (entry
and slot), the task id, the publishing process (Celery's ``origin`` header, ``gen<pid>@<host>``)
and when it arrived. It reconnects by itself, so it keeps recording across a broker that is
killed, restarted or frozen under it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from kombu import Connection, Consumer, Exchange, Queue

T = TypeVar("T")


@dataclass(frozen=True)
class Delivery:
    """One message as the broker delivered it."""

    entry: str
    slot: int  # UTC epoch ms, from the hashbeat_slot header
    task_id: str
    origin: str
    received: float  # wall-clock seconds, time.time() on arrival

    @property
    def pid(self) -> int | None:
        """The publishing process, from ``origin`` (``gen<pid>@<host>``)."""
        head = self.origin.partition("@")[0]
        return int(head[3:]) if head.startswith("gen") and head[3:].isdigit() else None

    @property
    def lateness_ms(self) -> float:
        """How long after its slot the message arrived."""
        return self.received * 1000 - self.slot


def iso_to_ms(text: str) -> int:
    """Epoch ms of an ISO 8601 instant with an offset (``Z`` accepted)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset")
    return round(moment.timestamp() * 1000)


def celery_queue(name: str) -> Queue:
    """The queue, exchange and routing key a Celery app configured with ``name`` for all three
    publishes to."""
    return Queue(name, Exchange(name, "direct"), routing_key=name)


class Recorder:
    """Drains ``queue`` (and the queues ``also``) on ``broker_url`` in a thread; ``deliveries()``
    is what arrived so far, and ``triggered`` the (entry, task id) of the operators' triggers."""

    def __init__(self, broker_url: str, queue: str, also: Sequence[Queue] = ()) -> None:
        self.broker_url = broker_url
        self.queue = queue
        self.also = tuple(also)
        self.malformed: list[str] = []
        self.triggered: list[tuple[str, str]] = []
        self.connects = 0
        self.last_error: str | None = None
        self._deliveries: list[Delivery] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recorder", daemon=True)

    def start(self, timeout: float = 10.0) -> Recorder:
        """Start draining; returns once the queue is declared, so nothing published after it
        is routed nowhere."""
        self._thread.start()
        if not self._connected.wait(timeout):
            raise RuntimeError(
                f"recorder could not connect to {self.broker_url}: {self.last_error}"
            )
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def deliveries(self) -> list[Delivery]:
        with self._lock:
            return list(self._deliveries)

    def wait_for(self, find: Callable[[list[Delivery]], T | None], timeout: float) -> T | None:
        """The first non-None answer of ``find(deliveries)``, asked on every arrival, or None
        after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = find(self._deliveries)
                left = deadline - time.monotonic()
                if found is not None or left <= 0:
                    return found
                self._changed.wait(min(left, 0.1))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._drain()
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                self._stop.wait(0.05)

    def _drain(self) -> None:
        with Connection(self.broker_url, connect_timeout=1) as conn:
            conn.ensure_connection(max_retries=1)
            with Consumer(
                conn,
                [celery_queue(self.queue), *self.also],
                on_message=self._on_message,
                no_ack=True,
            ):
                self.connects += 1
                self._connected.set()
                while not self._stop.is_set():
                    try:
                        conn.drain_events(timeout=0.2)
                    except TimeoutError:
                        continue

    def _on_message(self, message: Any) -> None:
        received = time.time()
        headers = message.headers or {}
        if "hashbeat_trigger" in headers:
            with self._changed:
                self.triggered.append((str(headers.get("hashbeat_entry")), str(headers.get("id"))))
                self._changed.notify_all()
            return
        try:
            delivery = Delivery(
                entry=str(headers["hashbeat_entry"]),
                slot=iso_to_ms(str(headers["hashbeat_slot"])),
                task_id=str(headers["id"]),
                origin=str(headers.get("origin", "")),
                received=received,
            )
        except (KeyError, ValueError) as exc:
            with self._lock:
                self.malformed.append(f"{exc!r}: {headers!r}")
            return
        with self._changed:
            self._deliveries.append(delivery)
            self._changed.notify_all()
