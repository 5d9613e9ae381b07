"""Celery's own schedules as slots: a crontab evaluated by the engine, anything else asked
through its own API.

A Celery schedule is foreign code to the beat: a subclass may override ``is_due`` (a holiday
calendar), and a custom one may read the real clock or take forever to answer. DerivedSlots checks
every answer and refuses, by name, a schedule that cannot answer within its time budget, so one
bad schedule never stalls the beat.
"""

from __future__ import annotations

import copy
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from celery.schedules import BaseSchedule

from celery_hashbeat.entries.errors import ScheduleEnded, ScheduleTooSlow
from celery_hashbeat.expr import parse
from celery_hashbeat.expr.slots import (
    EPOCH,
    MILLISECOND,
    CronSlots,
    Slots,
    duration_ms,
    to_datetime,
    to_ms,
)

if TYPE_CHECKING:
    from celery import Celery


#: Celery's crontab fields, in cron's order, with each field's whole range.
CRONTAB_FIELDS = (
    ("minute", range(60)),
    ("hour", range(24)),
    ("day_of_month", range(1, 32)),
    ("month_of_year", range(1, 13)),
    ("day_of_week", range(7)),
)


def crontab_slots(schedule: Any, zone: Any) -> CronSlots:
    """A Celery ``crontab`` evaluated by the engine, in the app's timezone.

    Celery's own arithmetic reads hours in the timezone of the datetime it is handed and, before
    5.7, steps across a DST change on the old UTC offset (07:00 Berlin fired at 08:00 on the
    night the clocks moved). Its fields are plain value sets, so the engine, which handles
    zones and DST by cron's rules, computes the same slots exactly; day fields combine with AND,
    as Celery's do.
    """
    fields = []
    for name, whole in CRONTAB_FIELDS:
        values = sorted(getattr(schedule, name))
        fields.append("*" if values == list(whole) else ",".join(map(str, values)))
    return CronSlots(parse(" ".join(fields), tz=zone, day_and=True))


#: The longest a Celery schedule may take to say its next slot, and to list a catch-up's missed
#: slots (seconds). A schedule that takes longer once is refused from then on: the beat has other
#: entries to run, and nothing interrupts a pure Python loop safely.
ANSWER_BUDGET = 1.0
WALK_BUDGET = 10 * ANSWER_BUDGET


def private_copy(schedule: BaseSchedule) -> Any:
    """A shallow copy of ``schedule`` made from its attributes, never through ``__reduce__``.

    ``copy.copy`` rebuilds an object from ``__reduce__``; RedBeat's ``rrule`` reduces to
    ``(cls, <its dateutil rule>)``, which copy unpacks by iterating the rule: forever, for a rule
    without an end. Values cached from another app (``tz``, ``utc_enabled``) are dropped.
    """
    kind = type(schedule)
    try:
        clone = kind.__new__(kind)
    except TypeError:
        return copy.copy(schedule)
    for owner in kind.__mro__:
        names = vars(owner).get("__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name not in ("__dict__", "__weakref__") and hasattr(schedule, name):
                setattr(clone, name, getattr(schedule, name))
    state = getattr(schedule, "__dict__", None)
    if state is not None:
        clone.__dict__.update(state)
        for cached in ("tz", "utc_enabled"):
            clone.__dict__.pop(cached, None)
    return clone


#: Where the ``is_due`` of the schedules beat knows is defined: theirs only reads their slots.
OWN_IS_DUE = ("celery.schedules", "celery_hashbeat.schedules", "redbeat.schedules")


def overrides_is_due(schedule: BaseSchedule) -> bool:
    """Whether ``schedule``'s class (a subclass of a Celery schedule, typically) defines its own
    ``is_due``: a holiday calendar, a business-day or feature-flag gate."""
    for owner in type(schedule).__mro__:
        if "is_due" in vars(owner):
            return owner.__module__ not in OWN_IS_DUE
    return False


class DerivedSlots(Slots):
    """Any other Celery schedule (solar, relative, custom, RedBeat's rrule), asked through its
    own API.

    A private copy of the schedule reads a frozen clock set to the instant asked about, so
    ``now + remaining_estimate(last_run_at=now)`` is a pure function of that instant: the next
    slot, deterministic whatever the real time and whichever beat asks. Instants go to the
    schedule in the app's timezone, as Celery's own beat hands them over (``app.now()``).

    The schedule is foreign code, so its answers are checked, never trusted to end: an answer
    must move forward, must not read the real clock (beats would disagree), and must come within
    ANSWER_BUDGET; a schedule that fails once is refused from then on, with the reason.
    """

    __slots__ = (
        "_after",
        "_checked",
        "_frozen",
        "_next",
        "_refused",
        "_spent",
        "_walking",
        "_zone",
        "asks_is_due",
        "schedule",
    )
    #: A relative or custom schedule may count from where it started; anchoring costs one
    #: store write per new entry, and is harmless for those that do not.
    chained = True

    def __init__(self, schedule: BaseSchedule, app: Celery) -> None:
        clone = private_copy(schedule)
        clone.app = app
        clone.nowfun = self._now
        self.schedule = clone
        #: crontab before Celery 5.7 reads hours in the timezone of the datetime it is given.
        self._zone = clone.tz
        self._frozen = EPOCH
        self._after = -1
        self._next = -1
        self._checked = False
        self._refused: str | None = None
        self._spent = 0.0
        self._walking = False
        self.asks_is_due = overrides_is_due(schedule)

    def consents(self, slot: int, last: int) -> bool:
        """Ask the schedule's own ``is_due`` at ``slot`` (its clock frozen there), as Celery's
        beat asks it when the slot comes."""
        zone = self._zone
        self._frozen = to_datetime(slot).astimezone(zone)
        return bool(self.schedule.is_due(to_datetime(last).astimezone(zone))[0])

    def _now(self) -> datetime:
        return self._frozen

    def _ask(self, moment: datetime, now: datetime) -> int:
        """The schedule's next slot after ``moment``, its clock frozen at ``now``, timed."""
        self._frozen = now
        started = time.perf_counter()
        try:
            try:
                remaining: Any = self.schedule.remaining_estimate(moment)
            except NotImplementedError:
                remaining = self.schedule.is_due(moment)[1]
                remaining = None if remaining is None else timedelta(seconds=remaining)
        finally:
            took = time.perf_counter() - started
            self._spent += took
        if took > ANSWER_BUDGET:
            self._refuse(f"took {took:.1f} s to say its next slot (the limit is {ANSWER_BUDGET} s)")
        if self._walking and self._spent > WALK_BUDGET:
            self._refuse(f"took over {WALK_BUDGET} s to list its missed slots")
        if remaining is None:
            raise ScheduleEnded(f"{self.schedule!r} has no slot after {moment.isoformat()}")
        if not isinstance(remaining, timedelta):
            self._refuse(f"answered {remaining!r}, not a timedelta")
        return to_ms(now) + duration_ms(remaining)

    def _refuse(self, why: str) -> NoReturn:
        self._refused = f"{self.schedule!r} {why}; skipping it"
        raise ScheduleTooSlow(self._refused)

    def next_after(self, ms: int) -> int:
        if self._refused is not None:
            raise ScheduleTooSlow(self._refused)
        if ms != self._after:
            moment = to_datetime(ms).astimezone(self._zone)
            following = self._ask(moment, moment)
            if following <= ms:
                self._refuse(f"never moves past {moment.isoformat()}")
            if not self._checked:
                # Asked again with the clock half-way to the answer, a schedule that reads only
                # the clock it is given says the same slot; one that reads the real time does not.
                later = moment + (following - ms) // 2 * MILLISECOND
                if self._ask(moment, later) != following:
                    self._refuse("reads the real clock, so no two beats would agree on its slots")
                self._checked = True
            self._next = following
            self._after = ms
        return self._next

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        """As Slots.recent, within WALK_BUDGET: a schedule too slow to list a backlog is refused
        rather than let it stall the beat."""
        self._spent, self._walking = 0.0, True
        try:
            return super().recent(low, high, limit)
        finally:
            self._walking = False
