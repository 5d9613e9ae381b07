"""No run on top of a run, the worker's side (docs/design.md §12).

A guarded slot's message carries the header ``hashbeat_run_ttl``. When its task starts, the
worker takes the entry's run lease over (the beat took it for the task's id when it claimed the
slot), renews it every TTL/3 while the task runs, and releases it, owner-checked, when the task
ends in any way (signals.py says which of Celery's signals tell each end). A worker that dies
stops renewing, and the lease lapses within its TTL.

Store calls happen on one thread per process, never on the task's: a slow or unreachable store
delays the lease, not the task.
"""

from __future__ import annotations

import queue
import time
from typing import TYPE_CHECKING, NamedTuple

from celery_hashbeat._logs import RUN_LEASES
from celery_hashbeat._outage import Outage
from celery_hashbeat.worker._thread import ServingThread

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.store.base import Store
    from celery_hashbeat.worker.stores import Stores

logger = RUN_LEASES


class _Ask(NamedTuple):
    """Hold (``ttl_ms`` > 0) or release (``ttl_ms`` 0) ``entry``'s run lease for ``task_id``."""

    entry: str
    task_id: str
    ttl_ms: int
    store: Store


class _Held(NamedTuple):
    entry: str
    ttl_ms: int
    store: Store


class RunKeeper:
    """The run leases one process holds, kept on a thread of its own: takes, renews every
    TTL/3, and releases, in the order asked."""

    def __init__(self, stores: Stores) -> None:
        self._stores = stores
        self._asks: ServingThread[_Ask] = ServingThread("hashbeat-run-lease", self._serve)
        self._outage = Outage(logger, "hashbeat: run leases are kept again (after: %(cause)s)")

    def hold(self, app: Celery, entry: str, task_id: str, ttl_ms: int) -> None:
        """Take ``entry``'s run lease over for ``task_id`` and renew it until released."""
        self._ask(app, entry, task_id, ttl_ms)

    def release(self, app: Celery, entry: str, task_id: str) -> None:
        """Release ``entry``'s run lease if ``task_id`` holds it."""
        self._ask(app, entry, task_id, 0)

    def _ask(self, app: Celery, entry: str, task_id: str, ttl_ms: int) -> None:
        try:
            store = self._stores.of(app)
        except Exception as exc:
            self._failed(exc)
            return
        self._asks.put(_Ask(entry, task_id, ttl_ms, store))

    def _serve(self, asks: queue.SimpleQueue[_Ask]) -> None:
        """The thread: answer each ask, and renew what is held when a renewal is due."""
        held: dict[str, _Held] = {}
        next_renewal = time.monotonic()
        while True:
            wait = max(0.0, next_renewal - time.monotonic()) if held else None
            try:
                ask = asks.get(timeout=wait)
            except queue.Empty:
                next_renewal = self._renew(held)
                continue
            try:
                if ask.ttl_ms:
                    held[ask.task_id] = _Held(ask.entry, ask.ttl_ms, ask.store)
                    if not ask.store.hold_run(ask.entry, ask.task_id, ask.ttl_ms):
                        held.pop(ask.task_id, None)
                        logger.warning(
                            "hashbeat: %s's run lease is held by another run; task %s runs "
                            "without it",
                            ask.entry,
                            ask.task_id,
                        )
                    next_renewal = min(next_renewal, time.monotonic() + ask.ttl_ms / 3000)
                else:
                    held.pop(ask.task_id, None)
                    ask.store.release_run(ask.entry, ask.task_id)
                self._outage.answered()
            except Exception as exc:
                self._failed(exc)

    def _renew(self, held: dict[str, _Held]) -> float:
        """Renew every held lease, store by store; the next renewal is due in a third of the
        shortest TTL."""
        shortest = min((run.ttl_ms for run in held.values()), default=3000)
        by_store: dict[int, tuple[Store, dict[str, str], int]] = {}
        for task_id, run in held.items():
            by_store.setdefault(id(run.store), (run.store, {}, run.ttl_ms))[1][run.entry] = task_id
        for store, runs, ttl_ms in by_store.values():
            try:
                renewed = store.renew_runs(runs, ttl_ms)
                self._outage.answered()
            except Exception as exc:
                self._failed(exc)
                continue
            for entry in set(runs) - renewed:
                logger.warning(
                    "hashbeat: %s's run lease was lost (it lapsed, or another run replaced it); "
                    "task %s runs on without it",
                    entry,
                    runs[entry],
                )
                held.pop(runs[entry], None)
        return time.monotonic() + shortest / 3000

    def _failed(self, exc: Exception) -> None:
        self._outage.failed(
            exc,
            "hashbeat: cannot keep run leases (%s: %s); a lease not renewed lapses after "
            "hashbeat_running_ttl and the entry's next slot then runs",
            type(exc).__name__,
            exc,
        )
