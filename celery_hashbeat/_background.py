"""Blocking calls on a helper thread, so the tick can stop waiting for them.

A leaf shared by the two rooms that wait on the network from the beat's thread: ``beat/``
(the store's calls, through ``beat.storecalls``) and ``publish/`` (the broker's).

A broker that hangs, or a store whose replies stop coming, would otherwise hold the beat's main
thread, and with it every stop request, for as long as the socket lets it. The caller waits in
short steps and asks ``give_up()`` between them; a call it gives up on is left to finish (or
not) on its own thread, its outcome unknown, and the next call gets a fresh thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: How often a waiting caller asks whether to give up (seconds).
POLL = 0.05


class Abandoned(Exception):  # noqa: N818 - it is not an error of the call, but of the wait
    """The caller stopped waiting; the call may still complete, or may have done so."""


class Job:
    """One call handed to the helper thread: its outcome once ``done`` is set."""

    __slots__ = ("args", "done", "error", "function", "result")

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.function = function
        self.args = args
        self.done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.function(*self.args)
        except BaseException as exc:  # handed to the caller, whatever it is
            self.error = exc
        finally:
            self.done.set()


class Runner:
    """One helper thread at a time, running calls in order; replaced when a call is abandoned."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._inbox: queue.SimpleQueue[Job | None] | None = None
        self._count = 0

    def call(self, function: Callable[..., T], *args: Any, give_up: Callable[[], bool]) -> T:
        """``function(*args)`` on the helper thread; raises Abandoned if ``give_up()`` turns
        true before it returns."""
        result: T = self.wait(self.submit(function, *args), give_up=give_up)
        return result

    def submit(self, function: Callable[..., Any], *args: Any) -> Job:
        """Start ``function(*args)`` on the helper thread, after the calls before it, and return
        at once: ``wait`` for it later (a caller with other work to do meanwhile)."""
        job = Job(function, args)
        self._inbox_for_use().put(job)
        return job

    def wait(self, job: Job, *, give_up: Callable[[], bool]) -> Any:
        """The result of a submitted call, as ``call`` waits for it."""
        while not job.done.wait(POLL):
            if give_up():
                self._retire()
                raise Abandoned("gave up waiting for the call to return")
        if job.error is not None:
            raise job.error
        return job.result

    def close(self) -> None:
        self._retire()

    def _inbox_for_use(self) -> queue.SimpleQueue[Job | None]:
        if self._inbox is None:
            inbox: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
            self._count += 1
            thread = threading.Thread(
                target=_serve, args=(inbox,), name=f"{self.name}-{self._count}", daemon=True
            )
            thread.start()
            self._inbox = inbox
        return self._inbox

    def _retire(self) -> None:
        """The current thread takes no more calls: it ends once its call (if any) returns."""
        if self._inbox is not None:
            self._inbox.put(None)
            self._inbox = None


def _serve(inbox: queue.SimpleQueue[Job | None]) -> None:
    while (job := inbox.get()) is not None:
        job.run()
