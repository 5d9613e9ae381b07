"""What became of each slot's task, the worker's side of the history (docs/design.md §14).

When a task sent for a slot (its message carries ``hashbeat_entry`` and ``hashbeat_slot``) starts
and ends, the worker adds ``started`` and then ``succeeded`` or ``failed`` (with how long it ran)
to the entry's history, so ``hashbeat show`` tells each run end to end. A retry ends its attempt
as ``failed`` with the reason ``retry``. A task that ends without its own process saying so
(its process lost, killed, or the task revoked before it ran) is recorded ``failed`` by the
worker's main process, with the reason (signals.py says which signal tells which).

As with the run leases (leases.py), nothing here runs on the task's thread beyond putting a
record on a queue: one thread per process writes them, in batches, to the store of the task's
app; a store that is slow or down delays or drops the records (logged once), never the task.
"""

from __future__ import annotations

import queue
import time
from typing import TYPE_CHECKING, NamedTuple

from celery_hashbeat._logs import OUTCOMES
from celery_hashbeat._outage import Outage
from celery_hashbeat.observe.history import FAILED, STARTED, SUCCEEDED, Record, encode
from celery_hashbeat.worker._thread import ServingThread

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.store.base import Store
    from celery_hashbeat.worker.headers import SlotMessage
    from celery_hashbeat.worker.stores import Stores

logger = OUTCOMES

#: The most records waiting to be written; beyond it new ones are dropped (the store is down).
BACKLOG = 10_000

#: Celery's end states, as the history says them.
ENDS = {"SUCCESS": (SUCCEEDED, ""), "FAILURE": (FAILED, ""), "RETRY": (FAILED, "retry")}


class _Pending(NamedTuple):
    app: Celery
    entry: str
    text: str


class OutcomeWriter:
    """Records of this process's slot tasks, written to the store on a thread of its own."""

    def __init__(self, stores: Stores) -> None:
        self._stores = stores
        self._pending: ServingThread[_Pending] = ServingThread("hashbeat-outcomes", self._serve)
        self._outage = Outage(logger, "hashbeat: slot task history is written again")

    def add(self, app: Celery, entry: str, record: Record) -> None:
        self._pending.put(_Pending(app, entry, encode(record)), backlog=BACKLOG)

    def _serve(self, pending: queue.SimpleQueue[_Pending]) -> None:
        """The thread: write what waits, in one batch per store."""
        while True:
            batch = [pending.get()]
            while True:
                try:
                    batch.append(pending.get_nowait())
                except queue.Empty:
                    break
            self._write(batch)

    def _write(self, batch: list[_Pending]) -> None:
        by_store: dict[int, tuple[Store, list[tuple[str, str]]]] = {}
        for app, entry, text in batch:
            try:
                store = self._stores.of(app)
            except Exception as exc:
                self._failed(exc)
                continue
            by_store.setdefault(id(store), (store, []))[1].append((entry, text))
        for store, records in by_store.values():
            try:
                store.record(records)
            except Exception as exc:
                self._failed(exc)
                continue
            self._outage.answered()

    def _failed(self, exc: Exception) -> None:
        self._outage.failed(
            exc,
            "hashbeat: cannot write the history of slot tasks (%s: %s); their "
            "started/succeeded/failed records are dropped until the store answers",
            type(exc).__name__,
            exc,
        )


class TaskHistory:
    """The records of this process's slot tasks: started, then succeeded or failed. A report:
    nothing here ever breaks a task (a failure to record is logged at debug level)."""

    def __init__(self, writer: OutcomeWriter) -> None:
        self._writer = writer
        #: task id -> monotonic start, for the run time.
        self._began: dict[str, float] = {}

    def started(self, app: Celery, task_id: str, message: SlotMessage, node: str) -> None:
        try:
            self._began[task_id] = time.monotonic()
            record = Record(STARTED, message.slot_ms, now_ms(), node, task_id)
            self._writer.add(app, message.entry, record)
        except Exception:
            logger.debug("hashbeat: could not record a start", exc_info=True)

    def ended(
        self, app: Celery, task_id: str, message: SlotMessage, node: str, state: str | None
    ) -> None:
        """The task's own process says it ended, in Celery's ``state``."""
        try:
            began = self._began.pop(task_id, None)
            outcome, reason = ENDS.get(state or "", (FAILED, str(state or "").lower()))
            run_ms = None if began is None else round((time.monotonic() - began) * 1000)
            record = Record(
                outcome, message.slot_ms, now_ms(), node, task_id, reason, run_ms=run_ms
            )
            self._writer.add(app, message.entry, record)
        except Exception:
            logger.debug("hashbeat: could not record an end", exc_info=True)

    def lost(self, app: Celery, task_id: str, message: SlotMessage, node: str, why: str) -> None:
        """The worker's main process says the task ended without its own process saying so."""
        try:
            record = Record(FAILED, message.slot_ms, now_ms(), node, task_id, why)
            self._writer.add(app, message.entry, record)
        except Exception:
            logger.debug("hashbeat: could not record a lost task", exc_info=True)


def now_ms() -> int:
    """The time now, UTC epoch ms, as the history says it."""
    return int(time.time() * 1000)
