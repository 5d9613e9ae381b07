"""From a ``beat_schedule`` definition to an Entry: its keys, their checks and its first slot.

``build_entry`` is where a definition that cannot run is caught, as an EntryError naming the
entry, before the scheduler keeps it; ``as_definition`` turns an Entry (or Celery's ScheduleEntry)
back into the definition it stands for. Kept apart from entries.py, which holds what the scheduler
keeps of each entry and how it moves through its slots.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

from celery.beat import ScheduleEntry
from celery.schedules import crontab

from celery_hashbeat.entries.bounds import BoundedSlots, bound_ms, check_bounds
from celery_hashbeat.entries.derived import DerivedSlots
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.entries.errors import EntryError, ScheduleEnded, ScheduleTooSlow
from celery_hashbeat.entries.oneshot import OnceSlots
from celery_hashbeat.entries.promises import promise_keys, promises_of
from celery_hashbeat.expr.calendar import check_on_excluded
from celery_hashbeat.expr.slots import CalendarSlots, Slots, to_datetime
from celery_hashbeat.expr.zones import load_zone
from celery_hashbeat.schedules import at, excluded_days, hashcron
from celery_hashbeat.settings import (
    CatchUp,
    Overlap,
    catch_up_mode,
    catch_up_window,
    overlap_mode,
)

if TYPE_CHECKING:
    from celery_hashbeat.entries.sharing import SharedSlots
    from celery_hashbeat.settings import Settings

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
        "exclude",
        "on_excluded",
        # What the entry promises its operators (entries/promises.py).
        "max_lateness",
        "alert_after_failures",
        "pause_after_failures",
    }
)

#: The keys of nearly every definition: with no others, an entry takes the settings' policy and
#: has no bounds, exclusions or promises of its own to check (a million entries at start).
PLAIN_KEYS = frozenset({"task", "schedule", "args", "kwargs", "options", "relative"})

#: The keys that bound an entry's slots (docs/design.md §13).
BOUNDS = frozenset({"start", "end", "max_runs"})

#: The keys that set an entry's own catch-up and overlap policy instead of the settings'.
POLICY = frozenset({"catch_up", "catch_up_window", "overlap"})


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
            **calendar_keys(definition),
            **promise_keys(definition.promises),
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


def calendar_keys(entry: Entry) -> dict[str, Any]:
    """The ``exclude`` and ``on_excluded`` keys an entry was built with (none without)."""
    source = entry.source
    source = source.inner if isinstance(source, BoundedSlots) else source
    if not isinstance(source, CalendarSlots):
        return {}
    return {"exclude": list(source.calendar.specs), "on_excluded": source.mode}


#: What an entry's schedule and policy keys decide, the same for every plain definition that
#: gives one schedule object (the balancer hands ~60 placed ones to a million entries): the
#: schedule object, its slots, its fingerprint, the catch-up and overlap policies, the catch-up
#: window (ms) and ``max_runs``. A plain tuple: one is made per entry that shares none.
Timing = tuple[Any, Slots, str, CatchUp, Overlap, int | None, int | None]


def build_entry(
    name: str,
    definition: Any,
    settings: Settings,
    shared: SharedSlots,
    now: int,
    placed: hashcron | None = None,
    timings: dict[tuple[int, bool], Timing] | None = None,
) -> Entry:
    """An Entry from a beat_schedule value (a dict, or a ScheduleEntry), checked by computing its
    first slot, so a definition that cannot run fails here, naming the entry. ``placed`` is the
    balancer's schedule for it (docs/design.md §16), in place of the definition's; ``timings``
    keeps the Timing of each placed schedule of plain definitions, for the caller's next ones
    (placed schedules are shared: their slots are the same whatever the entry's name)."""
    raw = definition
    definition = raw if type(raw) is dict else as_definition(raw)
    if definition is None:
        raise EntryError(f"entry {name!r}: expected a dict, not {type(raw).__name__}")
    plain = definition.keys() <= PLAIN_KEYS
    if not plain:
        check_keys(name, definition)
    task = definition.get("task")
    if not isinstance(task, str) or not task:
        raise EntryError(f"entry {name!r}: 'task' must be a task name, not {task!r}")
    args = definition.get("args") or ()
    kwargs = definition.get("kwargs") or {}
    options = definition.get("options") or {}
    if not (_is_mapping(kwargs) and _is_mapping(options)):
        raise EntryError(f"entry {name!r}: 'kwargs' and 'options' must be dicts")
    relative = bool(definition.get("relative", False))
    try:
        kept = timings if placed is not None and plain else None
        timing = None if kept is None else kept.get((id(placed), relative))
        if timing is None:
            given = definition.get("schedule") if placed is None else placed
            timing = timing_of(name, definition, given, relative, plain, settings, shared, now)
            if kept is not None:  # the caller's ``placed`` keeps the object, and so its id
                kept[(id(placed), relative)] = timing
        promises = None if plain else promises_of(name, definition)
    except EntryError:
        raise
    except Exception as exc:
        raise EntryError(f"entry {name!r}: {exc}") from exc
    schedule, source, fingerprint, mode, overlap, window_ms, max_runs = timing
    entry = Entry(
        name,
        task,
        schedule,
        source,
        tuple(args),
        kwargs,
        options,
        relative,
        mode,
        window_ms,
        fingerprint,
        overlap,
        0 if overlap == "allow" else settings.running_ttl_ms,
        shared,
        now,
    )
    entry.max_runs = max_runs
    entry.promises = promises
    return entry


def timing_of(
    name: str,
    definition: Mapping[str, Any],
    given: Any,
    relative: bool,
    plain: bool,
    settings: Settings,
    shared: SharedSlots,
    now: int,
) -> Timing:
    """The Timing of entry ``name`` whose schedule is ``given``, checked by computing its first
    slot; ``plain``: ``definition`` has only PLAIN_KEYS (the settings' policy, no bounds)."""
    fingerprint = shared.fingerprint(given, relative)
    if plain or POLICY.isdisjoint(definition):  # the settings' policy, checked there
        mode, overlap = settings.catch_up, settings.overlap
    else:
        mode = catch_up_mode(definition.get("catch_up", settings.catch_up), "catch_up")
        overlap = overlap_mode(definition.get("overlap", settings.overlap), "overlap")
    check_overlap(overlap, mode)
    window = (
        catch_up_window(definition["catch_up_window"], "catch_up_window")
        if not plain and "catch_up_window" in definition
        else default_window(given, settings)
    )
    source = shared.source(name, given, relative)
    excludes = not plain or bool(getattr(given, "exclude", ()))
    calendar = calendar_of(definition, given) if excludes else None
    if calendar is not None:
        source = shared.excluding(source, calendar[0], zone_of(given, shared), calendar[1])
        fingerprint = excluding_fingerprint(fingerprint, source.calendar.identity, calendar[1])
    max_runs = None
    if not (plain or BOUNDS.isdisjoint(definition)):
        start = bound_ms(definition.get("start"), "start")
        end = bound_ms(definition.get("end"), "end")
        max_runs = check_bounds(start, end, definition.get("max_runs"))
        if start is not None or end is not None:
            source = BoundedSlots(source, start, end)
    first_slot(source, now)
    return (
        shared.schedule_object(given, relative),
        source,
        fingerprint,
        mode,
        overlap,
        None if window is None else round(window * 1000),
        max_runs,
    )


def check_keys(name: str, definition: Mapping[str, Any]) -> None:
    """Refuse keys that are not known, and ``workers`` (fanned out before a build)."""
    if not definition.keys() <= KNOWN_KEYS:
        unknown = sorted(set(definition) - KNOWN_KEYS)
        raise EntryError(f"entry {name!r}: unknown keys {unknown}; known: {sorted(KNOWN_KEYS)}")
    if "workers" in definition:
        raise EntryError(f"entry {name!r}: 'workers' is fanned out before an entry is built")


def calendar_of(definition: Mapping[str, Any], given: Any) -> tuple[tuple[str, ...], str] | None:
    """The entry's exclude list (its schedule's and its own ``exclude`` key's, in that order)
    and ``on_excluded`` mode; None when it excludes nothing (docs/design.md §20)."""
    own = definition.get("exclude")
    specs = (*getattr(given, "exclude", ()), *excluded_days(own))
    if not specs:
        if definition.get("on_excluded") is not None:
            raise ValueError("'on_excluded' says what to do on an excluded day: give 'exclude' too")
        return None
    if isinstance(given, at):
        raise ValueError(
            "a one-shot (at) has one instant: 'exclude' cannot apply; choose another instant"
        )
    if own is not None and not (isinstance(own, str) or _is_list(own)):
        raise ValueError(f"'exclude' must be a list of texts, not {own!r}")
    mode = definition.get("on_excluded") or getattr(given, "on_excluded", None)
    return tuple(dict.fromkeys(specs)), check_on_excluded(mode)


def zone_of(given: Any, shared: SharedSlots) -> tzinfo:
    """The zone an entry's days are counted in: its hashcron's, else the app's."""
    zone = getattr(given, "zone", None) if isinstance(given, hashcron) else None
    return shared.zone if zone is None else load_zone(zone)


def excluding_fingerprint(fingerprint: str, identity: tuple[str, ...], mode: str) -> str:
    """The fingerprint of a schedule with a calendar (its ``Calendar.identity``): a changed
    calendar, or a changed ``ical:`` file, is a changed schedule. A schedule without one keeps
    its plain fingerprint (the store's fences of old stay valid)."""
    text = "\x1f".join((fingerprint, mode, *identity))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _is_list(value: object) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)


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
    the scheduler asks it again every ``beat_max_loop_interval``, as Celery's own does. A
    one-shot whose instant has passed is kept too: its fence says whether it ran (§21)."""
    if type(source) is OnceSlots:  # not isinstance: Slots is an ABC, and this is per entry
        return
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
