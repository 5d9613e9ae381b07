"""Celery's send methods as extension points: ``apply_entry``, ``apply_async``, ``send_task``.

Tools hook a beat by patching these on ``celery.beat.Scheduler`` (Sentry Crons'
``monitor_beat_tasks`` wraps ``apply_entry``, Datadog too), and users by overriding them in a
subclass. The batch path (docs/design.md §15) calls none of them. So the scheduler looks, at
start and at each tick, whether any is hooked; while one is, the batch path is off and each
claimed slot goes through them, one at a time, as Celery's own beat sends it: ``apply_entry``
(when hooked), then ``apply_async`` and Celery's task or ``send_task``. The slot travels as a
copy of its entry whose options carry the slot's task id and headers, so what a hook adds to
them reaches the broker, and the entry in the schedule is left as it was. The claim comes
first, as on every path, and what the hook raises is the slot's outcome (given back, dropped
or kept, docs/design.md §15). With nothing hooked none of this runs per slot.
"""

from __future__ import annotations

import copy
from types import FunctionType
from typing import TYPE_CHECKING, Any

from celery import beat
from celery.beat import SchedulingError

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.publish.message import slot_options

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from celery_hashbeat.entries.entry import Entry

logger = SCHEDULER

#: The methods of Celery's scheduler that its beat sends through, and that tools patch.
HOOKABLE = ("apply_entry", "apply_async", "send_task")


def celery_own(function: Any, name: str) -> bool:
    """Whether ``function`` is Celery's own ``Scheduler.<name>``, not a tool's wrapper of it
    (a wrapper made with ``functools.wraps`` keeps the name but not the code)."""
    code = getattr(function, "__code__", None)
    return (
        isinstance(function, FunctionType)
        and function.__module__ == beat.__name__
        and function.__qualname__ == f"Scheduler.{name}"
        and code is not None
        and code.co_name == name
        and not hasattr(function, "__wrapped__")
    )


#: Celery's own methods, as found when this module was first imported (None: already patched).
CELERY_OWN: dict[str, Any] = {
    name: function if celery_own(function := vars(beat.Scheduler)[name], name) else None
    for name in HOOKABLE
}


def unwrapped(exc: BaseException) -> BaseException:
    """What a publish raised, out of the ``SchedulingError`` Celery's ``apply_async`` wraps it
    in, so that a refused connection is told apart from a message that can never be sent."""
    if isinstance(exc, SchedulingError) and exc.__context__ is not None:
        return exc.__context__
    return exc


def slot_entry(entry: Entry, task_id: str, when: str) -> Entry:
    """A detached copy of ``entry`` whose options send one slot: its task id and headers."""
    view = copy.copy(entry)
    view.options = slot_options(entry, task_id, when)
    return view


class SendHooks:
    """Which of Celery's send methods are hooked on one scheduler, and the way a slot goes
    through them while one is."""

    def __init__(self, scheduler: Any, own: Mapping[str, Callable[..., Any]]) -> None:
        #: The scheduler whose methods are looked at and called.
        self._scheduler = scheduler
        #: The methods the scheduler's class defines in place of Celery's (calling Celery's).
        self._own = own
        #: The hooked methods, each with who hooked it, as last looked at.
        self.hooked: dict[str, str] = {}
        #: The task id of the slot going through the hooks now, and what it failed with.
        self._routing: str | None = None
        self._failure: BaseException | None = None

    @property
    def active(self) -> bool:
        return bool(self.hooked)

    def look(self) -> bool:
        """Look again (at start, and at each tick: a tool may patch late); say when it
        changed. A few attribute reads."""
        found = self._find()
        if found != self.hooked:
            self.hooked = found
            if found:
                one = len(found) == 1
                logger.info(
                    "beat: %s overridden or patched (%s): every slot goes through %s, one "
                    "message at a time, while %s",
                    " and ".join(f"Scheduler.{name}" for name in found)
                    + (" is" if one else " are"),
                    "; ".join(f"{name}: {who}" for name, who in found.items()),
                    "it" if one else "them",
                    "it is" if one else "they are",
                )
            else:
                logger.info("beat: Celery's send methods are no longer hooked: sending in batches")
        return bool(found)

    def _find(self) -> dict[str, str]:
        scheduler = self._scheduler
        cls, own, found = type(scheduler), self._own, {}
        patched_on = vars(scheduler)
        celery = vars(beat.Scheduler)
        for name in HOOKABLE:
            ours = own.get(name)
            function = patched_on.get(name) or getattr(cls, name)
            if ours is not None and function is ours:
                function = celery[name]  # ours calls Celery's: is that one still Celery's?
            if function is not CELERY_OWN[name]:
                found[name] = who(function)
        return found

    def send(self, entry: Entry, task_id: str, when: str, producer: Any) -> Any:
        """Send one slot through the hooked methods; raise what its publish raised."""
        scheduler = self._scheduler
        view = slot_entry(entry, task_id, when)
        self._routing, self._failure = task_id, None
        result = raised = None
        try:
            if "apply_entry" in self.hooked:
                # As Celery's beat calls it (Sentry's wrapper takes the entry positionally).
                result = scheduler.apply_entry(view, producer=producer)
            else:
                result = scheduler.apply_async(view, producer=producer, advance=False)
        except Exception as exc:
            raised = unwrapped(exc)
        finally:
            self._routing = None
        # Celery's apply_entry logs what apply_async raised and goes on: the slot failed all
        # the same. Raised here, outside the handler, the error keeps its own cause.
        failure, self._failure = raised or self._failure, None
        if failure is not None:
            raise failure
        return result

    def routing(self, entry: Any) -> bool:
        """Whether ``entry`` is (a copy of) the slot going through the hooks now."""
        routing = self._routing
        if routing is None:
            return False
        options = getattr(entry, "options", None)
        return isinstance(options, dict) and options.get("task_id") == routing

    def failed(self, entry: Any, exc: BaseException) -> None:
        """``apply_async`` raised for ``entry``: if it is the slot going through, that is its
        outcome, even if a hook around it swallows the error."""
        if self.routing(entry):
            self._failure = unwrapped(exc)


def who(function: Any) -> str:
    """Where a hook comes from, for the log: its module and name (a wrapper object's type)."""
    shown = function if isinstance(function, FunctionType) else type(function)
    return f"{shown.__module__}.{shown.__qualname__}"
