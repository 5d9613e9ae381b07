"""Schedule entries as the scheduler keeps them: small, slotted, and planned in UTC epoch ms.

An entry knows the next slot it should fire and, while catching up, the missed slots it still
owes; the catch-up policy (docs/design.md §5) lives here, in ``advance``. Entries are built
(building.py) from the ``beat_schedule`` dicts Celery users already write, plus the ``catch_up``
and ``catch_up_window`` keys; a definition that cannot run raises EntryError, which names the
entry.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, cast

from celery.beat import BeatLazyFunc, ScheduleEntry

from celery_hashbeat.entries.bounds import BoundedSlots
from celery_hashbeat.entries.errors import ScheduleEnded
from celery_hashbeat.entries.oneshot import OnceSlots
from celery_hashbeat.entries.promises import Promises
from celery_hashbeat.expr.slots import Slots, to_datetime, to_ms
from celery_hashbeat.schedules import HashSchedule
from celery_hashbeat.settings import CatchUp, Overlap

if TYPE_CHECKING:
    from celery import Celery

#: The most missed slots ``catch_up="all"`` enqueues for one entry.
ALL_CAP = 100

#: The most slots one catch-up counts as missed (a longer backlog is reported as this many).
MISSED_COUNT_CAP = 100

_order = itertools.count()


class EntryOwner(Protocol):
    """What an entry asks of the one that built it (sharing.SharedSlots): the app, how to hold a
    schedule put in place of its own, and where to report that it changed."""

    @property
    def app(self) -> Celery: ...

    @property
    def changed(self) -> list[Entry]: ...

    def schedule_object(self, given: Any, relative: bool) -> Any: ...


class StoredFence(Protocol):
    """What an entry reads of the fence the store keeps for it (store.values.Fence): the
    fingerprint of the schedule its slot belongs to, None if that was not recorded."""

    @property
    def fingerprint(self) -> str | None: ...


class Entry(ScheduleEntry):
    """One entry of the schedule.

    A ScheduleEntry to anything that inspects the scheduler, but slotted and never built through
    ScheduleEntry.__init__, which makes a schedule object and a datetime per entry: at 100,000
    entries memory is the budget that matters.
    """

    __slots__ = (
        "_schedule",
        "active",
        "args",
        "catch_up",
        "fingerprint",
        "kwargs",
        "last_slot",
        "lazy",
        "max_runs",
        "name",
        "options",
        "order",
        "overlap",
        "owner",
        "pending",
        "promises",
        "relative",
        "run_ttl_ms",
        "slot",
        "source",
        "task",
        "total_run_count",
        "window",
    )

    name: str
    task: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    options: dict[str, Any]
    #: Slots the catch-up policy just left out, as (the latest of them, how many, why), for the
    #: scheduler to report and clear; set on the instance only when it happens.
    missed: tuple[int, int, str] | None = None

    def __init__(
        self,
        name: str,
        task: str,
        schedule: Any,
        source: Slots,
        args: Any,
        kwargs: Any,
        options: Any,
        relative: bool,
        catch_up: CatchUp,
        window: int | None,
        fingerprint: str = "",
        overlap: Overlap = Overlap.ALLOW,
        run_ttl_ms: int = 0,
        owner: EntryOwner | None = None,
        created: int | None = None,
    ) -> None:
        self.name = name
        self.task = task
        #: The schedule object (ints and timedeltas made Celery ``schedule`` objects).
        self._schedule = schedule
        #: The scheduler's SharedSlots (as an EntryOwner): the app, and where a changed schedule
        #: is reported.
        self.owner = owner
        self.source = source
        self.args = args
        self.kwargs = kwargs
        self.options = options
        self.relative = relative
        self.catch_up = catch_up
        self.window = window
        #: Names the schedule in the store's fence, so a changed schedule is recognised there.
        self.fingerprint = fingerprint
        #: What a slot due while the previous run holds the run lease does (docs/design.md §12).
        self.overlap = overlap
        #: The run lease's TTL (ms) for a guarded entry; 0 for "allow", which takes none.
        self.run_ttl_ms = run_ttl_ms
        self.lazy = bool(args or kwargs) and any(
            isinstance(value, BeatLazyFunc) for value in (*args, *kwargs.values())
        )
        self.order = next(_order)
        self.active = True
        self.slot: int | None = None
        self.pending: list[int] | None = None
        #: What ``last_run_at`` says (epoch ms): the last slot sent, else where the entry's
        #: slots start (its anchor in the store, or when this beat built it).
        self.last_slot: int | None = created
        self.total_run_count = 0
        #: Sends after which the entry is done (docs/design.md §13), counted in the store.
        self.max_runs: int | None = None
        #: What it promises its operators (entries/promises.py); None for most entries.
        self.promises: Promises | None = None

    @property
    def last_run_at(self) -> datetime | None:
        """The last slot enqueued (by any beat, once this one has led), else where the entry's
        slots count from, as Celery's entries say when they were created."""
        return None if self.last_slot is None else to_datetime(self.last_slot)

    @last_run_at.setter
    def last_run_at(self, value: datetime | None) -> None:
        self.last_slot = None if value is None else to_ms(value)

    # What Celery's ScheduleEntry offers, for code written against celery.beat ------------------

    @property
    def schedule(self) -> Any:
        """The schedule object; an unkeyed hashcron or hashinterval comes keyed by the entry's
        name (made on each read, so the entry stays small), so that ``is_due`` can answer."""
        given = self._schedule
        if isinstance(given, HashSchedule) and given.key is None:
            bound = given.bound(self.name)
            if self.owner is not None:
                bound.app = self.owner.app
            return bound
        return given

    @schedule.setter
    def schedule(self, value: Any) -> None:
        """Replace the schedule, as Celery lets code do; the scheduler replans the entry at its
        next tick."""
        owner = self.owner
        self._schedule = value if owner is None else owner.schedule_object(value, self.relative)
        if owner is not None:
            owner.changed.append(self)

    # Celery sets ``app`` in the __init__ that Entry skips; here it is the scheduler's.
    @property
    def app(self) -> Celery | None:  # type: ignore[override]
        return None if self.owner is None else self.owner.app

    def __copy__(self) -> Entry:
        """A detached copy: changing it does not change the schedule."""
        clone = Entry.__new__(Entry)
        for name in Entry.__slots__:
            setattr(clone, name, getattr(self, name))
        if self.pending is not None:
            clone.pending = list(self.pending)
        return clone

    def _next_instance(self, last_run_at: datetime | None = None) -> Entry:
        """A copy as if sent now (or at ``last_run_at``): Celery's ``next(entry)``."""
        clone = copy.copy(self)
        clone.last_run_at = last_run_at or self.default_now()
        clone.total_run_count = self.total_run_count + 1
        return clone

    __next__ = next = _next_instance

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as Celery's own ScheduleEntry (what a pickled beat schedule holds): the slot
        source belongs to the process that planned it."""
        return ScheduleEntry, (
            self.name,
            self.task,
            self.last_run_at,
            self.total_run_count,
            self.schedule,
            self.args,
            self.kwargs,
            self.options,
            self.relative,
        )

    def __iter__(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]  # Celery's stub
        """The fields Celery's ``dict(entry)`` lists."""
        for name in ("name", "task", "last_run_at", "total_run_count", "schedule", "args"):
            yield name, getattr(self, name)
        yield from (("kwargs", self.kwargs), ("options", self.options), ("app", self.app))

    def update(self, other: ScheduleEntry) -> None:
        """Take the editable fields of ``other``, as Celery's ``update`` does."""
        self.task, self.args = cast(str, other.task), tuple(other.args or ())
        self.kwargs, self.options = dict(other.kwargs or {}), dict(other.options or {})
        self.schedule = other.schedule

    def same_as(self, other: Entry) -> bool:
        """Whether a reloaded definition leaves this entry as it was."""
        return (
            self.task == other.task
            and self.args == other.args
            and self.kwargs == other.kwargs
            and self.options == other.options
            and self.relative == other.relative
            and self.catch_up == other.catch_up
            and self.window == other.window
            and self.overlap == other.overlap
            and self.run_ttl_ms == other.run_ttl_ms
            and self.max_runs == other.max_runs
            and self.promises == other.promises
            and self.bounds == other.bounds
            and self.fingerprint == other.fingerprint
            and type(self._schedule) is type(other._schedule)
            and self._schedule == other._schedule
        )

    def hold_schedule_of(self, other: Entry) -> None:
        """Take ``other``'s schedule object and its slots, for a definition that leaves this
        entry as it was (``same_as``): equal schedules need not be alike (Celery's
        ``schedule`` compares its interval only, not an ``is_due`` gate), so the one given
        last is the one asked."""
        if self._schedule is not other._schedule:
            self._schedule, self.source = other._schedule, other.source

    @property
    def bounds(self) -> tuple[int | None, int | None]:
        """The entry's ``start`` and ``end`` (epoch ms), or None each."""
        source = self.source
        return (source.start, source.end) if isinstance(source, BoundedSlots) else (None, None)

    def start(self, fence: int | None, now: int) -> None:
        """Pick the entry up as a new leader: catch up from the last slot enqueued, or, for one
        never enqueued, wait for its next slot after now (a new entry never fires on start)."""
        self.pending = None
        if type(self.source) is OnceSlots:
            fence = self.source.counts_from(fence)
        if fence is None:
            self.slot = self.source.next_after(now)
        else:
            self.advance(fence, now)

    def advance(self, done: int, now: int) -> None:
        """Move past slot ``done``: to the next slot, or, if slots were missed, to the first of
        those the catch-up policy keeps."""
        pending = self.pending
        if pending:
            self.slot = pending.pop()
            if not pending:
                self.pending = None
            return
        following = self.source.next_after(done)
        if following > now:
            self.slot = following
            return
        self._head(self._missed(done, now), done, now)

    def _head(self, kept: list[int], done: int, now: int, *, head_dropped: bool = False) -> None:
        """Head the entry with the missed slots kept, or, with none kept, with the first slot
        after now along its own schedule (from ``done``, so a chained interval keeps its
        phase). The slots left out (``done`` too, with ``head_dropped``) are noted in
        ``missed``."""
        overdue = self.source.recent(done, now, MISSED_COUNT_CAP)
        dropped = [slot for slot in overdue if slot not in kept]
        if head_dropped:
            dropped.insert(0, done)
        if dropped:
            self._note_missed(dropped[-1], len(dropped), now)
        if kept:
            self.slot = kept[0]
            self.pending = kept[:0:-1] or None
            return
        self.slot = self.source.next_after(overdue[-1] if overdue else done)
        self.pending = None

    def _note_missed(self, latest: int, count: int, now: int) -> None:
        old = self.missed
        window = self.window is not None and latest < now - self.window
        reason = "catch_up_window" if window else f"catch_up={self.catch_up}"
        if old is not None:
            latest, count = max(latest, old[0]), min(count + old[1], MISSED_COUNT_CAP)
        self.missed = (latest, count, reason)

    def _missed(self, after: int, now: int) -> list[int]:
        if self.catch_up == CatchUp.SKIP:
            return []
        low = after if self.window is None else max(after, now - self.window - 1)
        return self.source.recent(low, now, 1 if self.catch_up == CatchUp.LATEST else ALL_CAP)

    def needs_anchor(self, fence: StoredFence | None) -> bool:
        """Whether the store must record where this entry's slots start: a chained schedule
        never sent, or a fence of another schedule (the entry changed; a fence whose schedule
        was not recorded counts as this one)."""
        if fence is None:
            return self.source.chained
        return fence.fingerprint not in (None, self.fingerprint)

    def _missed_after(self, slot: int, now: int) -> bool:
        """Whether later slots than ``slot`` are already due (none are, after a schedule's last)."""
        try:
            return self.source.next_after(slot) <= now
        except ScheduleEnded:
            return False

    def ready(self, now: int) -> bool:
        """Whether the slot at the head of the queue is to be enqueued now. An overdue slot with
        later slots overdue too goes through the catch-up policy first, and a slot older than the
        window is never enqueued: either may move the entry on."""
        slot = self.slot
        assert slot is not None
        if self.pending is None and self._missed_after(slot, now):
            kept = self._missed(slot, now)
            if self.catch_up == CatchUp.ALL and (self.window is None or slot >= now - self.window):
                kept = [slot, *kept][-ALL_CAP:]
            self._head(kept, slot, now, head_dropped=slot not in kept)
            slot = cast(int, self.slot)
        if self.window is not None and slot < now - self.window:
            self._note_missed(slot, 1, now)
            self.advance(slot, now)
        slot = self.slot
        if slot is not None and slot <= now and self.source.asks_is_due:
            # A schedule overriding is_due is asked at its slot, as Celery asks it at each
            # tick: "not due" skips this slot (docs/design.md §5's heap stays in charge).
            last = self.last_slot
            if not self.source.consents(slot, slot if last is None else min(last, slot)):
                self.advance(slot, now)
                return False
        return self.slot is not None and self.slot <= now
