"""Schedule entries as the scheduler keeps them: small, slotted, and planned in UTC epoch ms.

An entry knows the next slot it should fire and, while catching up, the missed slots it still
owes; the catch-up policy (DESIGN.md §5) lives here, in ``advance``. Entries are built from the
``beat_schedule`` dicts Celery users already write, plus the ``catch_up`` and ``catch_up_window``
keys; a definition that cannot run raises EntryError, which names the entry.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
from collections.abc import Hashable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta, tzinfo
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from celery.beat import BeatLazyFunc, ScheduleEntry
from celery.schedules import BaseSchedule, crontab, schedule, solar

from celery_hashbeat.bounds import BoundedSlots, bound_ms, check_bounds
from celery_hashbeat.schedules import HashSchedule, hashcron, hashinterval
from celery_hashbeat.settings import catch_up_mode, catch_up_window, overlap_mode
from celery_hashbeat.slots import (
    ChainSlots,
    CronSlots,
    DerivedSlots,
    ScheduleEnded,
    ScheduleTooSlow,
    Slots,
    crontab_slots,
    duration_ms,
    to_datetime,
    to_ms,
)

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.settings import Settings
    from celery_hashbeat.store.base import Fence

#: The most missed slots ``catch_up="all"`` enqueues for one entry.
ALL_CAP = 100

#: The most slots one catch-up counts as missed (a longer backlog is reported as this many).
MISSED_COUNT_CAP = 100

KNOWN_KEYS = frozenset(
    {
        "task",
        "schedule",
        "args",
        "kwargs",
        "options",
        "relative",
        "catch_up",
        "catch_up_window",
        "overlap",
        "workers",
        "start",
        "end",
        "max_runs",
    }
)

#: The keys that bound an entry's slots (DESIGN.md §13).
BOUNDS = frozenset({"start", "end", "max_runs"})

_order = itertools.count()


class EntryError(ValueError):
    """A beat_schedule entry that cannot run; the message names the entry."""


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
        catch_up: str,
        window: int | None,
        fingerprint: str = "",
        overlap: str = "allow",
        run_ttl_ms: int = 0,
        owner: SharedSlots | None = None,
        created: int | None = None,
    ) -> None:
        self.name = name
        self.task = task
        #: The schedule object (ints and timedeltas made Celery ``schedule`` objects).
        self._schedule = schedule
        #: The scheduler's SharedSlots: the app, and where a changed schedule is reported.
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
        #: What a slot due while the previous run holds the run lease does (DESIGN.md §12).
        self.overlap = overlap
        #: The run lease's TTL (ms) for a guarded entry; 0 for "allow", which takes none.
        self.run_ttl_ms = run_ttl_ms
        self.lazy = any(isinstance(value, BeatLazyFunc) for value in (*args, *kwargs.values()))
        self.order = next(_order)
        self.active = True
        self.slot: int | None = None
        self.pending: list[int] | None = None
        #: What ``last_run_at`` says (epoch ms): the last slot sent, else where the entry's
        #: slots start (its anchor in the store, or when this beat built it).
        self.last_slot: int | None = created
        self.total_run_count = 0
        #: Sends after which the entry is done (DESIGN.md §13), counted in the store.
        self.max_runs: int | None = None

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
            and self.bounds == other.bounds
            and type(self._schedule) is type(other._schedule)
            and self._schedule == other._schedule
        )

    @property
    def bounds(self) -> tuple[int | None, int | None]:
        """The entry's ``start`` and ``end`` (epoch ms), or None each."""
        source = self.source
        return (source.start, source.end) if isinstance(source, BoundedSlots) else (None, None)

    def start(self, fence: int | None, now: int) -> None:
        """Pick the entry up as a new leader: catch up from the last slot enqueued, or, for one
        never enqueued, wait for its next slot after now (a new entry never fires on start)."""
        self.pending = None
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
        if self.catch_up == "skip":
            return []
        low = after if self.window is None else max(after, now - self.window - 1)
        return self.source.recent(low, now, 1 if self.catch_up == "latest" else ALL_CAP)

    def needs_anchor(self, fence: Fence | None) -> bool:
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
            if self.catch_up == "all" and (self.window is None or slot >= now - self.window):
                kept = [slot, *kept][-ALL_CAP:]
            self._head(kept, slot, now, head_dropped=slot not in kept)
            slot = cast(int, self.slot)
        if self.window is not None and slot < now - self.window:
            self._note_missed(slot, 1, now)
            self.advance(slot, now)
        slot = self.slot
        if slot is not None and slot <= now and self.source.asks_is_due:
            # A schedule overriding is_due is asked at its slot, as Celery asks it at each
            # tick: "not due" skips this slot (DESIGN.md §5's heap stays in charge).
            last = self.last_slot
            if not self.source.consents(slot, slot if last is None else min(last, slot)):
                self.advance(slot, now)
                return False
        return self.slot is not None and self.slot <= now


class SharedSlots:
    """Builds each entry's slot source, sharing one among entries whose schedules agree, so a
    hundred thousand entries hold a few hundred parsed expressions between them."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self._shared: dict[Hashable, Slots] = {}
        self._prints: dict[tuple[Hashable, ...], str] = {}
        self._objects: dict[tuple[timedelta, bool], schedule] = {}
        #: Entries (or copies of them) whose schedule was replaced in place since the scheduler
        #: last looked.
        self.changed: list[Entry] = []
        #: The last schedule whose identity was derived, and the identity: building an entry
        #: asks twice (its slots and its fingerprint), a million entries at start.
        self._derived: tuple[Any, Hashable | None] = (None, None)

    @cached_property
    def zone(self) -> tzinfo:
        """The app's timezone (read once: the app is configured before a scheduler starts)."""
        zone: tzinfo = self.app.timezone
        return zone

    @cached_property
    def zone_name(self) -> str:
        return str(self.zone)

    def _identity_of(self, given: BaseSchedule) -> Hashable | None:
        last, identity = self._derived
        if last is not given:
            identity = derived_identity(given)
            self._derived = (given, identity)
        return identity

    def schedule_object(self, given: Any, relative: bool) -> Any:
        """``given`` as a schedule object, as Celery's entries hold it: seconds and timedeltas
        become one shared ``schedule`` per interval; any other schedule is kept, given the app
        if it has none."""
        if isinstance(given, BaseSchedule):
            if getattr(given, "_app", None) is None:
                given.app = self.app  # as Celery's entries do, so its clock and zone are the app's
            return given
        if isinstance(given, int | float) and not isinstance(given, bool):
            given = timedelta(seconds=given)
        if not isinstance(given, timedelta):
            return given
        found = self._objects.get((given, relative))
        if found is None:
            found = self._objects[(given, relative)] = schedule(given, relative, app=self.app)
        return found

    def _share(self, identity: Hashable, make: Any) -> Slots:
        found = self._shared.get(identity)
        if found is None:
            found = self._shared[identity] = make()
        return found

    def source(self, name: str, given: Any, relative: bool) -> Slots:
        """The slots of ``given`` (any schedule Celery accepts, or ours) for entry ``name``."""
        if isinstance(given, hashcron):
            resolved = given.identity(name, self.zone)
            if resolved is None:
                given.compile(name, self.zone)  # raises what is wrong
            return self._share(
                ("cron", resolved), lambda: CronSlots(given.compile(name, self.zone))
            )
        if isinstance(given, hashinterval):
            return given.slots(name)
        if isinstance(given, int | float) and not isinstance(given, bool):
            given = timedelta(seconds=given)
        if isinstance(given, timedelta):
            given = schedule(given, relative, app=self.app)
        if type(given) is schedule and not given.relative:
            every = duration_ms(given.run_every)  # type: ignore[attr-defined]
            return self._share(("every", every), lambda: ChainSlots(every))
        if type(given) is crontab:
            zone = self.zone
            return self._share(
                (self._identity_of(given), self.zone_name), lambda: crontab_slots(given, zone)
            )
        if isinstance(given, BaseSchedule):
            identity = self._identity_of(given)
            if identity is None:
                return DerivedSlots(given, self.app)
            return self._share(identity, lambda: DerivedSlots(given, self.app))
        raise EntryError(
            f"entry {name!r}: unknown schedule type {type(given).__name__}: use hashcron, "
            f"hashinterval, crontab, solar, a celery.schedules.schedule, a timedelta or seconds"
        )

    def fingerprint(self, given: Any, relative: bool) -> str:
        """A short digest of what decides an entry's slots, the same in every process and
        release, so that the store can tell a changed schedule from the one it fenced. Computed
        once per distinct schedule: at 100,000 entries, start-up time is the budget."""
        identity = self._identity(given, relative)
        found = self._prints.get(identity)
        if found is None:
            text = " ".join(
                str(sorted(part) if isinstance(part, frozenset) else part) for part in identity
            )
            found = self._prints[identity] = hashlib.sha256(text.encode()).hexdigest()[:16]
        return found

    def _identity(self, given: Any, relative: bool) -> tuple[Hashable, ...]:
        zone = self.zone_name
        if isinstance(given, hashcron):
            cron = ("hashcron", given.expr, given.key, str(given.zone or zone), given.day_and)
            # A balanced entry's slots follow its assignment: a move is a changed schedule.
            return cron if given.offsets is None else (*cron, given.offsets)
        if isinstance(given, hashinterval):
            return ("hashinterval", given.every, given.key)
        if isinstance(given, int | float) and not isinstance(given, bool):
            given = timedelta(seconds=given)
        if isinstance(given, timedelta):
            return ("every", given, relative)
        if type(given) is schedule:
            return ("every", given.run_every, given.relative)  # type: ignore[attr-defined]
        identity = self._identity_of(given) if isinstance(given, BaseSchedule) else None
        if identity is not None:
            return (*cast(tuple[Hashable, ...], identity), zone)
        shown = repr(given)
        return (type(given).__qualname__, "" if " at 0x" in shown else shown)


def schedule_digest(entries: Iterable[Entry]) -> str:
    """What a beat runs, in a few characters: the same for beats of one configuration."""
    prints = {entry.name: entry.fingerprint for entry in entries}
    text = "".join([f"{name}\x1f{prints[name]}\x1e" for name in sorted(prints)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def derived_identity(schedule_: BaseSchedule) -> Hashable | None:
    """What makes two Celery schedules fire alike, for the kinds whose fields say so."""
    kind, given = type(schedule_), cast(Any, schedule_)
    if kind is crontab:
        fields = (given.minute, given.hour, given.day_of_week, given.day_of_month)
        return ("crontab", *map(frozenset, fields), frozenset(given.month_of_year))
    if kind is schedule:
        return ("relative", given.run_every)
    if kind is solar:
        return ("solar", given.event, given.lat, given.lon)
    return None


def as_definition(definition: Any) -> Mapping[str, Any] | None:
    """A beat_schedule value as a mapping (an Entry or a ScheduleEntry as the dict it stands
    for); None for anything else."""
    if type(definition) is dict:  # what nearly every beat_schedule holds: the quick way
        return definition
    if isinstance(definition, Entry):
        return {
            "task": definition.task,
            "schedule": definition._schedule,
            "args": definition.args,
            "kwargs": definition.kwargs,
            "options": definition.options,
            "relative": definition.relative,
            "catch_up": definition.catch_up,
            "catch_up_window": None if definition.window is None else definition.window / 1000,
            "overlap": definition.overlap,
            **bounds_of(definition),
        }
    if isinstance(definition, ScheduleEntry):
        return {
            "task": definition.task,
            "schedule": definition.schedule,
            "args": definition.args,
            "kwargs": definition.kwargs,
            "options": definition.options,
        }
    return definition if isinstance(definition, Mapping) else None


def bounds_of(entry: Entry) -> dict[str, Any]:
    """The bound keys an entry was built with (none for an unbounded one), so that an Entry
    handed back as a definition keeps its ``start``, ``end`` and ``max_runs``."""
    start, end = entry.bounds
    found: dict[str, Any] = {} if entry.max_runs is None else {"max_runs": entry.max_runs}
    found.update(
        (key, to_datetime(ms)) for key, ms in (("start", start), ("end", end)) if ms is not None
    )
    return found


def build_entry(
    name: str, definition: Any, settings: Settings, shared: SharedSlots, now: int
) -> Entry:
    """An Entry from a beat_schedule value (a dict, or a ScheduleEntry), checked by computing its
    first slot, so a definition that cannot run fails here, naming the entry."""
    raw, definition = definition, as_definition(definition)
    if definition is None:
        raise EntryError(f"entry {name!r}: expected a dict, not {type(raw).__name__}")
    if not definition.keys() <= KNOWN_KEYS:
        unknown = sorted(set(definition) - KNOWN_KEYS)
        raise EntryError(f"entry {name!r}: unknown keys {unknown}; known: {sorted(KNOWN_KEYS)}")
    if "workers" in definition:
        raise EntryError(f"entry {name!r}: 'workers' is fanned out before an entry is built")
    task = definition.get("task")
    if not isinstance(task, str) or not task:
        raise EntryError(f"entry {name!r}: 'task' must be a task name, not {task!r}")
    args = definition.get("args") or ()
    kwargs = definition.get("kwargs") or {}
    options = definition.get("options") or {}
    if not (_is_mapping(kwargs) and _is_mapping(options)):
        raise EntryError(f"entry {name!r}: 'kwargs' and 'options' must be dicts")
    relative = bool(definition.get("relative", False))
    given = definition.get("schedule")
    try:
        fingerprint = shared.fingerprint(given, relative)
        mode = catch_up_mode(definition.get("catch_up", settings.catch_up), "catch_up")
        overlap = overlap_mode(definition.get("overlap", settings.overlap), "overlap")
        check_overlap(overlap, mode)
        window = (
            catch_up_window(definition["catch_up_window"], "catch_up_window")
            if "catch_up_window" in definition
            else default_window(given, settings)
        )
        source = shared.source(name, given, relative)
        max_runs = None
        if not BOUNDS.isdisjoint(definition):
            start = bound_ms(definition.get("start"), "start")
            end = bound_ms(definition.get("end"), "end")
            max_runs = check_bounds(start, end, definition.get("max_runs"))
            if start is not None or end is not None:
                source = BoundedSlots(source, start, end)
        first_slot(source, now)
    except EntryError:
        raise
    except Exception as exc:
        raise EntryError(f"entry {name!r}: {exc}") from exc
    entry = Entry(
        name,
        task,
        shared.schedule_object(given, relative),
        source,
        tuple(args),
        kwargs,
        options,
        relative,
        mode,
        None if window is None else round(window * 1000),
        fingerprint,
        overlap,
        0 if overlap == "allow" else settings.running_ttl_ms,
        shared,
        now,
    )
    entry.max_runs = max_runs
    return entry


def _is_mapping(value: object) -> bool:
    return type(value) is dict or isinstance(value, Mapping)


def default_window(given: Any, settings: Settings) -> float | None:
    """The catch-up window of an entry that sets none: ``hashbeat_catch_up_window``, and for a
    crontab also Celery's ``beat_cron_starting_deadline`` (the tighter of the two applies)."""
    window, deadline = settings.catch_up_window, settings.cron_deadline
    if deadline is None or not isinstance(given, crontab):
        return window
    return deadline if window is None else min(window, deadline)


def first_slot(source: Slots, now: int) -> None:
    """Check that ``source`` can say its first slot. A Celery schedule that fails for another
    reason than having ended or being too slow (a database it reads is not up yet) is kept:
    the scheduler asks it again every ``beat_max_loop_interval``, as Celery's own does."""
    try:
        source.next_after(now)
    except (ScheduleEnded, ScheduleTooSlow):
        raise
    except Exception:
        if not isinstance(source, DerivedSlots):
            raise


def check_overlap(overlap: str, catch_up: str) -> None:
    """``buffer_one`` keeps only the newest waiting slot, so it cannot catch up all."""
    if overlap == "buffer_one" and catch_up == "all":
        raise ValueError(
            "overlap 'buffer_one' keeps only the most recent waiting slot, so catch_up 'all' "
            "cannot apply: set catch_up to 'latest' or 'skip', or overlap to 'skip'"
        )
