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


class _Call:
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
        self._inbox: queue.SimpleQueue[_Call | None] | None = None
        self._count = 0

    def call(self, function: Callable[..., T], *args: Any, give_up: Callable[[], bool]) -> T:
        """``function(*args)`` on the helper thread; raises Abandoned if ``give_up()`` turns
        true before it returns."""
        job = _Call(function, args)
        self._inbox_for_use().put(job)
        while not job.done.wait(POLL):
            if give_up():
                self._retire()
                raise Abandoned("gave up waiting for the call to return")
        if job.error is not None:
            raise job.error
        result: T = job.result
        return result

    def close(self) -> None:
        self._retire()

    def _inbox_for_use(self) -> queue.SimpleQueue[_Call | None]:
        if self._inbox is None:
            inbox: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
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


def _serve(inbox: queue.SimpleQueue[_Call | None]) -> None:
    while (job := inbox.get()) is not None:
        job.run()
