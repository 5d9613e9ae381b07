"""The worker's Celery receivers: the one place celery_hashbeat listens to a worker's tasks.

Importing ``celery_hashbeat`` connects them, and Celery's command line imports it in every
``celery`` process through the package's ``celery.commands`` entry point, so a worker of an app
configured for celery_hashbeat needs no step of its own.

A slot task's start and end are told by the process that runs it (``task_prerun``,
``task_postrun``: returned, raised, retried). An end its process cannot tell (revoked, killed by
its hard time limit, lost with its process) is told in the worker's main process
(``task_revoked``, ``task_failure``), which knows the task only from its message: it remembers
what each slot task's message said when it was received (``task_received``), in one map that
serves the run leases (leases.py) and the history (outcomes.py) alike.
"""

from __future__ import annotations

import socket
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, cast

from billiard.exceptions import WorkerLostError
from celery.signals import task_failure, task_postrun, task_prerun, task_received, task_revoked

from celery_hashbeat._logs import RUN_LEASES
from celery_hashbeat.worker.headers import SlotMessage, read
from celery_hashbeat.worker.leases import RunKeeper
from celery_hashbeat.worker.outcomes import OutcomeWriter, TaskHistory
from celery_hashbeat.worker.stores import Stores

if TYPE_CHECKING:
    from celery import Celery

#: Slot tasks the main process remembers (received, not yet seen to end); the oldest are
#: forgotten first.
REMEMBERED = 10_000

logger = RUN_LEASES


class Received:
    """In the worker's main process: slot tasks received, task id -> their message and the
    worker (node name) that received them."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._tasks: OrderedDict[str, tuple[SlotMessage, str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._tasks)

    def remember(self, task_id: str, message: SlotMessage, node: str) -> None:
        self._tasks[task_id] = (message, node)
        while len(self._tasks) > self._limit:
            self._tasks.popitem(last=False)

    def pop(self, task_id: str) -> tuple[SlotMessage, str] | None:
        return self._tasks.pop(task_id, None)


stores = Stores()
keeper = RunKeeper(stores)
history = TaskHistory(OutcomeWriter(stores))
received = Received(REMEMBERED)


def _node(task: Any) -> str:
    hostname = getattr(getattr(task, "request", None), "hostname", None)
    return str(hostname or socket.gethostname())


@task_received.connect(weak=False)
def _on_received(request: Any = None, **_: Any) -> None:
    message = read(getattr(request, "request_dict", None))
    if message is not None:
        node = getattr(request, "hostname", None) or socket.gethostname()
        received.remember(request.id, message, str(node))


@task_prerun.connect(weak=False)
def _on_prerun(task_id: str = "", task: Any = None, **_: Any) -> None:
    message = read(getattr(task, "request", None))
    if message is None:
        return
    if message.run_ttl_ms is not None:
        keeper.hold(task.app, message.entry, task_id, message.run_ttl_ms)
    if message.slot_ms is not None:
        history.started(task.app, task_id, message, _node(task))


@task_postrun.connect(weak=False)
def _on_postrun(task_id: str = "", task: Any = None, state: str | None = None, **_: Any) -> None:
    message = read(getattr(task, "request", None))
    if message is None:
        return
    if message.run_ttl_ms is not None:
        keeper.release(task.app, message.entry, task_id)
    if message.slot_ms is not None:
        history.ended(task.app, task_id, message, _node(task), state)


@task_revoked.connect(weak=False)
def _on_revoked(
    sender: Any = None,
    request: Any = None,
    terminated: bool = False,
    expired: bool = False,
    **_: Any,
) -> None:
    why = "expired" if expired else "revoked and terminated" if terminated else "revoked"
    _ended_unseen(_app_of(sender, request), getattr(request, "id", None) or "", why, request)


@task_failure.connect(weak=False)
def _on_failure(sender: Any = None, task_id: str = "", exception: Any = None, **_: Any) -> None:
    # Any other failure the history has from the process that ran the task, in task_postrun.
    why = "worker lost" if isinstance(exception, WorkerLostError) else None
    _ended_unseen(_app_of(sender), task_id, why)


def _app_of(*carriers: Any) -> Celery | None:
    """The app of a signal's task: its sender (the task) first, since the request Celery 5.7
    passes to ``task_revoked`` has no ``app``."""
    for carrier in carriers:
        app = getattr(carrier, "app", None)
        if app is not None:
            return cast("Celery", app)
    return None


def _ended_unseen(app: Celery | None, task_id: str, why: str | None, request: Any = None) -> None:
    """In the main process: a slot task ended, maybe without its own process saying so. Its run
    lease is released; the history records it failed when ``why`` says it was lost. The task is
    known from what its message said when received, or else from ``request``'s headers."""
    found = received.pop(task_id)
    if found is None:
        message = read(request)
        if message is None:
            return
        found = (message, str(getattr(request, "hostname", None) or socket.gethostname()))
    if app is None:
        logger.warning(
            "hashbeat: task %s of entry %s ended (%s) but its app is unknown here; its run lease "
            "lapses after hashbeat_running_ttl",
            task_id,
            found[0].entry,
            why or "ended",
        )
        return
    message, node = found
    if message.run_ttl_ms is not None:
        keeper.release(app, message.entry, task_id)
    if why is not None and message.slot_ms is not None:
        history.lost(app, task_id, message, node, why)
