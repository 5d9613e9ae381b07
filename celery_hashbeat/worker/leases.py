"""No run on top of a run, the worker's side (DESIGN.md §12).

A guarded slot's message carries the header ``hashbeat_run_ttl``. When its task starts, the
worker takes the entry's run lease over (the beat took it for the task's id when it claimed the
slot), renews it every TTL/3 while the task runs, and releases it, owner-checked, when the task
ends in any way: returned, raised, retried (``task_postrun``, in the process that ran it),
revoked, killed by its hard time limit or lost with its process (``task_revoked`` and
``task_failure``, in the worker's main process). A worker that dies stops renewing, and the lease
lapses within its TTL.

Store calls happen on one thread per process, never on the task's: a slow or unreachable store
delays the lease, not the task. Importing ``celery_hashbeat`` connects the handlers, and Celery's
command line imports it in every ``celery`` process through the package's ``celery.commands``
entry point, so a worker of an app configured for celery_hashbeat needs no step of its own.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from celery.signals import task_failure, task_postrun, task_prerun, task_received, task_revoked

from celery_hashbeat._logs import RUN_LEASES
from celery_hashbeat.publish.message import ENTRY_HEADER, RUN_TTL_HEADER
from celery_hashbeat.settings import Settings
from celery_hashbeat.store import open_store

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.store.base import Store

logger = RUN_LEASES

#: Guarded tasks the main process remembers (task id -> entry), to release a lease when the task
#: dies with its process; the oldest are forgotten first.
REMEMBERED = 10_000


class RunKeeper:
    """The run leases one process holds, kept on a thread of its own: takes, renews every
    TTL/3, and releases, in the order asked."""

    def __init__(self) -> None:
        #: task id -> (entry, ttl ms, store)
        self._held: dict[str, tuple[str, int, Store]] = {}
        self._asks: queue.SimpleQueue[tuple[str, str, str, int, Store]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._stores: dict[tuple[str, str], Store] = {}
        self._lock = threading.Lock()
        self._failing: str | None = None

    def start(self, app: Celery, entry: str, task_id: str, ttl_ms: int) -> None:
        self._ask("hold", app, entry, task_id, ttl_ms)

    def end(self, app: Celery, entry: str, task_id: str) -> None:
        self._ask("release", app, entry, task_id, 0)

    def _ask(self, what: str, app: Celery, entry: str, task_id: str, ttl_ms: int) -> None:
        store = self._store(app)
        if store is None:
            return
        self._ensure_thread()
        self._asks.put((what, entry, task_id, ttl_ms, store))

    def store_for(self, app: Celery) -> Store | None:
        """This process's store for ``app`` (shared with the history of slot tasks)."""
        return self._store(app)

    def _store(self, app: Celery) -> Store | None:
        """This process's store for ``app`` (opened after any fork: a connection never crosses
        one); None, logged once, when the settings name none that can be opened."""
        with self._lock:
            if self._pid != os.getpid():
                self._reset()
            try:
                settings = Settings.from_conf(app.conf, warn=False)
                key = (settings.store_url, settings.key_prefix)
                found = self._stores.get(key)
                if found is None:
                    found = self._stores[key] = open_store(
                        settings.store_url, prefix=settings.key_prefix, **settings.store_options
                    )
                return found
            except Exception as exc:
                self._failed(exc)
                return None

    def _reset(self) -> None:
        """Start afresh in a forked child: the parent's thread and connections are not ours."""
        self._pid = os.getpid()
        self._stores = {}
        self._held = {}
        self._asks = queue.SimpleQueue()
        self._thread = None

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="hashbeat-run-lease", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        next_renewal = time.monotonic()
        while True:
            wait = max(0.0, next_renewal - time.monotonic()) if self._held else None
            try:
                what, entry, task_id, ttl_ms, store = self._asks.get(timeout=wait)
            except queue.Empty:
                next_renewal = self._renew()
                continue
            try:
                if what == "hold":
                    self._held[task_id] = (entry, ttl_ms, store)
                    if not store.hold_run(entry, task_id, ttl_ms):
                        self._held.pop(task_id, None)
                        logger.warning(
                            "hashbeat: %s's run lease is held by another run; task %s runs "
                            "without it",
                            entry,
                            task_id,
                        )
                    next_renewal = min(next_renewal, time.monotonic() + ttl_ms / 3000)
                else:
                    self._held.pop(task_id, None)
                    store.release_run(entry, task_id)
                self._recovered()
            except Exception as exc:
                self._failed(exc)

    def _renew(self) -> float:
        """Renew every held lease, store by store; the next renewal is due in a third of the
        shortest TTL."""
        shortest = min((ttl for _, ttl, _ in self._held.values()), default=3000)
        by_store: dict[int, tuple[Store, dict[str, str], int]] = {}
        for task_id, (entry, ttl_ms, store) in self._held.items():
            by_store.setdefault(id(store), (store, {}, ttl_ms))[1][entry] = task_id
        for store, runs, ttl_ms in by_store.values():
            try:
                renewed = store.renew_runs(runs, ttl_ms)
                self._recovered()
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
                self._held.pop(runs[entry], None)
        return time.monotonic() + shortest / 3000

    def _failed(self, exc: Exception) -> None:
        if self._failing is None:
            logger.warning(
                "hashbeat: cannot keep run leases (%s: %s); a lease not renewed lapses after "
                "hashbeat_running_ttl and the entry's next slot then runs",
                type(exc).__name__,
                exc,
            )
        self._failing = str(exc)

    def _recovered(self) -> None:
        if self._failing is not None:
            logger.info("hashbeat: run leases are kept again (after: %s)", self._failing)
            self._failing = None


keeper = RunKeeper()

#: In the worker's main process: guarded tasks received, task id -> entry.
_received: OrderedDict[str, str] = OrderedDict()


def _guarded(headers: Any) -> tuple[str, int] | None:
    """The entry and run-lease TTL (ms) a message's headers carry, if it is a guarded slot."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    entry, ttl = get(ENTRY_HEADER), get(RUN_TTL_HEADER)
    if not isinstance(entry, str) or not isinstance(ttl, int | float) or ttl <= 0:
        return None
    return entry, max(1, round(ttl * 1000))


@task_received.connect(weak=False)
def _remember(request: Any = None, **_: Any) -> None:
    found = _guarded(getattr(request, "request_dict", None))
    if found is not None:
        _received[request.id] = found[0]
        while len(_received) > REMEMBERED:
            _received.popitem(last=False)


@task_prerun.connect(weak=False)
def _take_over(task_id: str = "", task: Any = None, **_: Any) -> None:
    found = _guarded(getattr(task, "request", None))
    if found is not None:
        keeper.start(task.app, found[0], task_id, found[1])


@task_postrun.connect(weak=False)
def _ended(task_id: str = "", task: Any = None, **_: Any) -> None:
    found = _guarded(getattr(task, "request", None))
    if found is not None:
        keeper.end(task.app, found[0], task_id)


@task_revoked.connect(weak=False)
def _revoked(request: Any = None, **_: Any) -> None:
    _died(getattr(request, "app", None), getattr(request, "id", ""))


@task_failure.connect(weak=False)
def _failed(sender: Any = None, task_id: str = "", **_: Any) -> None:
    _died(getattr(sender, "app", None), task_id)


def _died(app: Celery | None, task_id: str) -> None:
    """In the main process: a guarded task that ended without its own process saying so."""
    entry = _received.pop(task_id, None)
    if entry is not None and app is not None:
        keeper.end(app, entry, task_id)
