"""What a worker process keeps for itself: made afresh in a forked child.

Celery's prefork pool forks its children from the worker's main process. A thread does not run in
a forked child, and a connection must not be shared across a fork, so the worker's side keeps its
thread, its queue and its store connections per process, made on first use.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerProcess(Generic[T]):
    """A value of this process's own: ``get`` makes a new one in a process that forked."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._pid = 0
        self._value: T | None = None

    def get(self) -> T:
        """This process's value (the caller serialises calls: made once per process)."""
        if self._value is None or self._pid != os.getpid():
            self._pid = os.getpid()
            self._value = self._make()
        return self._value


class _Serving(Generic[T]):
    """One process's queue and the thread that serves it (None until the first item)."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[T] = queue.SimpleQueue()
        self.thread: threading.Thread | None = None


class ServingThread(Generic[T]):
    """A queue and the one daemon thread of this process that serves it, started with the first
    item (and again if it died). ``serve`` runs on that thread, for ever, taking from the queue.
    Nothing but ``put`` runs on the caller's thread: a slow store never delays a task."""

    def __init__(self, name: str, serve: Callable[[queue.SimpleQueue[T]], None]) -> None:
        self._name = name
        self._serve = serve
        self._lock = threading.Lock()
        self._serving: PerProcess[_Serving[T]] = PerProcess(_Serving)

    def put(self, item: T, backlog: int | None = None) -> None:
        """Queue ``item`` for the thread; dropped when ``backlog`` items wait already."""
        with self._lock:
            serving = self._serving.get()
            if backlog is not None and serving.queue.qsize() >= backlog:
                return
            serving.queue.put(item)
            if serving.thread is None or not serving.thread.is_alive():
                serving.thread = threading.Thread(
                    target=self._serve, args=(serving.queue,), name=self._name, daemon=True
                )
                serving.thread.start()
