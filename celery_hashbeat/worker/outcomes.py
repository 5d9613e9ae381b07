"""What became of each slot's task, the worker's side of the history (DESIGN.md §14).

When a task sent for a slot (its message carries ``hashbeat_entry`` and ``hashbeat_slot``) starts
and ends, the worker adds ``started`` and then ``succeeded`` or ``failed`` (with how long it ran)
to the entry's history, so ``hashbeat show`` tells each run end to end. A retry ends its attempt
as ``failed`` with the reason ``retry``. A task that ends without its own process saying so
(its process lost, killed, or the task revoked before it ran) is recorded ``failed`` by the
worker's main process, with the reason.

As with the run leases (running.py), nothing here runs on the task's thread beyond putting a
record on a queue: one thread per process writes them, in batches, to the store of the task's
app; a store that is slow or down delays or drops the records (logged once), never the task. The
handlers are connected when ``celery_hashbeat`` is imported, which Celery's command line does in
every ``celery`` process (the package's ``celery.commands`` entry point): no step of its own.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections import OrderedDict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from billiard.exceptions import WorkerLostError
from celery.signals import task_failure, task_postrun, task_prerun, task_received, task_revoked

from celery_hashbeat._logs import OUTCOMES
from celery_hashbeat.observe.history import FAILED, STARTED, SUCCEEDED, Record, encode
from celery_hashbeat.publish.message import ENTRY_HEADER, SLOT_HEADER
from celery_hashbeat.worker.leases import keeper

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.store.base import Store

logger = OUTCOMES

#: The most records waiting to be written; beyond it the oldest are dropped (the store is down).
BACKLOG = 10_000

#: Celery's end states, as the history says them.
ENDS = {"SUCCESS": (SUCCEEDED, ""), "FAILURE": (FAILED, ""), "RETRY": (FAILED, "retry")}


class OutcomeWriter:
    """Records of this process's slot tasks, written to the store on a thread of its own."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Celery, str, str]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._failing: str | None = None
        #: task id -> monotonic start, for the run time.
        self.started: dict[str, float] = {}

    def add(self, app: Celery, entry: str, record: Record) -> None:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's thread is not ours
                self._pid = os.getpid()
                self._queue = queue.SimpleQueue()
                self._thread = None
            if self._queue.qsize() >= BACKLOG:
                return
            self._queue.put((app, entry, encode(record)))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="hashbeat-outcomes", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            batch = [first]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            self._write(batch)

    def _write(self, batch: list[tuple[Celery, str, str]]) -> None:
        by_store: dict[int, tuple[Store, list[tuple[str, str]]]] = {}
        for app, entry, text in batch:
            store = keeper.store_for(app)
            if store is not None:
                by_store.setdefault(id(store), (store, []))[1].append((entry, text))
        for store, records in by_store.values():
            try:
                store.record(records)
            except Exception as exc:
                if self._failing is None:
                    logger.warning(
                        "hashbeat: cannot write the history of slot tasks (%s: %s); their "
                        "started/succeeded/failed records are dropped until the store answers",
                        type(exc).__name__,
                        exc,
                    )
                self._failing = str(exc)
                continue
            if self._failing is not None:
                logger.info("hashbeat: slot task history is written again")
                self._failing = None


writer = OutcomeWriter()


#: Slot tasks a worker's main process received and has not seen end, at most this many.
REMEMBERED = 10_000

#: In a worker's main process: slot tasks received, task id -> (entry, slot ms, worker).
_received: OrderedDict[str, tuple[str, int, str]] = OrderedDict()


def _slot_of(task: Any) -> tuple[str, int] | None:
    """The entry and slot (UTC epoch ms) of a slot task's message, or None for any other task."""
    return _slot_in(getattr(task, "request", None))


def _slot_in(request: Any) -> tuple[str, int] | None:
    """The entry and slot a task's request (or its message's request dict) carries."""
    get = getattr(request, "get", None)
    if get is None:
        return None
    entry, slot = get(ENTRY_HEADER), get(SLOT_HEADER)
    if not isinstance(entry, str) or not isinstance(slot, str):
        return None
    try:
        return entry, int(datetime.fromisoformat(slot).timestamp() * 1000)
    except ValueError:
        return None


def _worker(task: Any) -> str:
    hostname = getattr(getattr(task, "request", None), "hostname", None)
    return str(hostname or socket.gethostname())


@task_prerun.connect(weak=False)
def _started(task_id: str = "", task: Any = None, **_: Any) -> None:
    try:
        found = _slot_of(task)
        if found is None:
            return
        writer.started[task_id] = time.monotonic()
        record = Record(STARTED, found[1], int(time.time() * 1000), _worker(task), task_id)
        writer.add(task.app, found[0], record)
    except Exception:  # the history is a report: it never breaks a task
        logger.debug("hashbeat: could not record a start", exc_info=True)


@task_postrun.connect(weak=False)
def _ended(task_id: str = "", task: Any = None, state: str | None = None, **_: Any) -> None:
    try:
        began = writer.started.pop(task_id, None)
        found = _slot_of(task)
        if found is None:
            return
        outcome, reason = ENDS.get(state or "", (FAILED, str(state or "").lower()))
        run_ms = None if began is None else round((time.monotonic() - began) * 1000)
        record = Record(
            outcome,
            found[1],
            int(time.time() * 1000),
            _worker(task),
            task_id,
            reason,
            run_ms=run_ms,
        )
        writer.add(task.app, found[0], record)
    except Exception:
        logger.debug("hashbeat: could not record an end", exc_info=True)


@task_received.connect(weak=False)
def _remember(request: Any = None, **_: Any) -> None:
    found = _slot_in(getattr(request, "request_dict", None))
    if found is not None:
        node = getattr(request, "hostname", None) or socket.gethostname()
        _received[request.id] = (*found, str(node))
        while len(_received) > REMEMBERED:
            _received.popitem(last=False)


@task_failure.connect(weak=False)
def _failed(sender: Any = None, task_id: str = "", exception: Any = None, **_: Any) -> None:
    # Any other failure is told by the process that ran the task, in task_postrun.
    if isinstance(exception, WorkerLostError):
        _died(getattr(sender, "app", None), task_id, "worker lost")


@task_revoked.connect(weak=False)
def _revoked(
    request: Any = None, terminated: bool = False, expired: bool = False, **_: Any
) -> None:
    reason = "expired" if expired else "revoked and terminated" if terminated else "revoked"
    _died(getattr(request, "app", None), getattr(request, "id", ""), reason)


def _died(app: Celery | None, task_id: str, reason: str) -> None:
    """In the worker's main process: a slot task that ended without its process saying so."""
    try:
        found = _received.pop(task_id, None)
        if found is None or app is None:
            return
        entry, slot, node = found
        writer.add(app, entry, Record(FAILED, slot, int(time.time() * 1000), node, task_id, reason))
    except Exception:
        logger.debug("hashbeat: could not record a lost task", exc_info=True)
