"""What ``ScheduleAdmin`` and the ``hashbeat`` commands show of the schedule: the catalog a leader
holds and the slots it plans (docs/design.md §8), read without changing anything. Kept apart from
control/admin.py, which changes the schedule.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from celery_hashbeat.control.calendars import Fates, fates, moved_from
from celery_hashbeat.control.definitions import decode
from celery_hashbeat.control.pause_and_trigger import Pause, decode_pause
from celery_hashbeat.control.polling import ControlState
from celery_hashbeat.control.schedule_data import schedule_data
from celery_hashbeat.control.stored_text import DefinitionError
from celery_hashbeat.entries.building import as_definition
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.entries.oneshot import once_state
from celery_hashbeat.observe.history import Record, newest_first
from celery_hashbeat.settings import Settings

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.store import Store
    from celery_hashbeat.store.values import Fence, Roster

#: Slots listed per entry by ``get`` and ``list``.
NEXT_SLOTS = 10

#: Outcomes listed per entry by ``get``.
RECENT = 10


@dataclass(frozen=True)
class EntryView:
    """One entry as ``list`` and ``get`` show it."""

    name: str
    #: "config" (beat_schedule) or "store".
    source: str
    #: The definition as JSON data (a config entry's schedule as stored data where it can be).
    definition: dict[str, Any]
    pause: Pause | None
    #: The next slots (epoch ms) the leader sends, up to NEXT_SLOTS (a fanned-out entry's: its
    #: copies' together), as the leader plans them; empty for one it sends no more.
    next_slots: list[int]
    recent: list[Record]
    #: A store entry's revision (1 when added, one more per update); None for a config entry.
    #: ``update(..., revision=...)`` changes the entry only if it is still this one.
    revision: int | None = None
    #: A one-shot's state (docs/design.md §21): done, paused or to come; None for other entries.
    state: str | None = None
    #: The next slots its calendar moved slots onto (docs/design.md §20), each to those slots.
    moved_from: dict[int, list[int]] = field(default_factory=dict)
    #: What its calendar does to the schedule's own slots from now to the last of
    #: ``next_slots``; asked of entries named (``get``), not of a whole listing.
    fates: Fates = field(default_factory=Fates)

    @property
    def paused(self) -> bool:
        return self.pause is not None and self.pause.paused


@dataclass(frozen=True)
class Planned:
    """The schedule as a leader holds it, built without one: the catalog (docs/design.md §8), the
    message of each entry a beat would refuse, the operators' floors and the leader's census."""

    catalog: Catalog
    #: The message of every refusal the catalog made, by entry (it adds those it makes later).
    messages: dict[str, str]
    #: Entry -> the instant its slots count from since an add, update or resume (§13).
    floors: dict[str, int]
    #: The leader's last census of live workers (None: none yet, or no store read).
    roster: Roster | None
    #: The entries paused now, by name, as every beat reads them from the store.
    paused: dict[str, Pause] = field(default_factory=dict)

    @property
    def refusals(self) -> dict[str, str]:
        """The message of each entry a beat would refuse, by name: those that cannot run now."""
        broken = self.catalog.broken
        return {name: self.messages[name] for name in sorted(broken & self.messages.keys())}

    def next_slots(self, name: str, fence: Fence | None, now_ms: int, count: int) -> list[int]:
        """Entry ``name``'s next ``count`` slots as the leader plans them from ``fence``: none
        while it (or the entry it is a copy of) is paused, none past its ``max_runs``."""
        return self.catalog.next_slots(name, fence, self.floors, now_ms, count, self.paused)

    def silent(self, name: str, fence: Fence | None) -> str | None:
        """Why the leader sends no slot of entry ``name`` it runs, in a few words ("paused",
        "max_runs 3 used up"); None when nothing holds it back."""
        entry = self.catalog.entries.get(name)
        if entry is None:
            return None
        if self.catalog.held(name, self.paused):
            return "paused"
        runs = 0 if fence is None else fence.runs
        if entry.max_runs is not None and runs >= entry.max_runs:
            return f"max_runs {entry.max_runs} used up"
        return None


def plan_schedule(
    app: Celery,
    settings: Settings,
    configured: Mapping[str, Any],
    store: Store | None,
    now_ms: int,
    controls: ControlState | None = None,
) -> Planned:
    """``configured`` (beat_schedule) and, with ``store``, the stored entries (read as a beat
    reads them), their floors and the leader's census, built by the beats' catalog. Given
    ``controls`` (new), the store is read through it, so that ``follow`` can take what changes
    next."""
    if controls is None:
        controls = ControlState(report_unreadable=False)  # the commands list them themselves
    stored: dict[str, Any] = {}
    roster = None
    if store is not None:
        changed = controls.poll(store.changes(controls.version))
        stored = {name: d for name, d in changed.definitions.items() if d is not None}
        roster = store.roster()
    nodes = None if roster is None else roster.nodes
    catalog, messages = Catalog.preview(app, settings, now_ms, configured, stored, nodes)
    return Planned(catalog, messages, dict(controls.floors), roster, dict(controls.paused))


def follow(planned: Planned, controls: ControlState, store: Store) -> tuple[Planned, set[str]]:
    """``planned`` (built with ``controls``) brought up to what ``store`` holds now, as a beat
    takes operators' changes (beat/leadership.py's ``apply``): the stored entries changed since
    ``controls`` last read are built again in its catalog, in place (``Catalog.restock``), and
    the pauses and floors taken. Returns the plan, and the entries whose next slots may have
    moved: those a change names and those the catalog built again (a balanced entry that a new
    one moved). A new census is not followed: ``plan_schedule`` builds for it."""
    catalog = planned.catalog
    before = dict(catalog.entries)
    changes = store.changes(controls.version)
    changed = controls.poll(changes)
    if changed.definitions:
        catalog.restock(changed.definitions, changed.full)
    entries = catalog.entries
    rebuilt = {name for name, entry in entries.items() if before.get(name) is not entry}
    rebuilt |= before.keys() - entries.keys()
    parent_of = catalog.fanout.parent_of
    moved = {parent_of(name) or name for name in rebuilt} | changes.records.keys()
    floors, paused = dict(controls.floors), dict(controls.paused)
    return dataclasses.replace(planned, floors=floors, paused=paused), moved


def entry_views(
    planned: Planned,
    store: Store,
    now: int,
    wanted: list[str] | None,
    recent: int = RECENT,
    count: int = NEXT_SLOTS,
) -> list[EntryView]:
    """The entries ``wanted`` (every one with None) as ``ScheduleAdmin.get``/``list`` show
    them, from the schedule ``planned``: definition, pause, up to ``count`` next slots the
    leader plans and ``recent`` outcomes (0: none, which saves a store call per entry)."""
    configured = planned.catalog.configured  # Celery's own entries too
    records = store.changes(0).records
    names = sorted({*configured, *(n for n, (d, _) in records.items() if d is not None)})
    chosen = names if wanted is None else [n for n in wanted if n in names]
    copies = planned.catalog.fanout.subs
    planning = {name: sorted(copies.get(name, (name,))) for name in chosen}
    fences = store.fences([n for group in planning.values() for n in group])
    views = []
    for name in chosen:
        stored, pause_text = records.get(name, (None, None))
        revision = None
        if name in configured:
            source, definition = "config", config_data(name, configured[name])
        else:
            source, definition = "store", stored_data(name, cast(str, stored))
            revision = definition.pop("revision", 0)
        each = {
            planned_name: planned.next_slots(planned_name, fences.get(planned_name), now, count)
            for planned_name in planning[name]
        }
        slots = [slot for found in each.values() for slot in found]
        moved = {
            slot: origin
            for planned_name, found in each.items()
            for slot, origin in moved_from(planned.catalog.entries.get(planned_name), found).items()
        }
        pause = pause_of(name, pause_text)
        entry, fence = planned.catalog.entries.get(name), fences.get(name)
        found = Fates()
        if wanted is not None and slots:
            found = fates(entry, now, sorted(slots)[:count][-1])
        views.append(
            EntryView(
                name,
                source,
                definition,
                pause,
                sorted(slots)[:count],
                recent_outcomes(store, name, recent) if recent else [],
                revision,
                one_shot_state(entry, fence, slots, pause is not None and pause.paused),
                moved,
                found,
            )
        )
    return views


def one_shot_state(
    entry: Entry | None, fence: Fence | None, slots: list[int], paused: bool
) -> str | None:
    """A one-shot's state for the views (None for any other entry)."""
    if entry is None:
        return None
    return once_state(entry.source, None if fence is None else fence.slot, slots, paused)


def recent_outcomes(store: Store, name: str, count: int = RECENT) -> list[Record]:
    """Entry ``name``'s newest ``count`` outcomes, newest first by when each happened (records
    that do not read back are left out)."""
    return newest_first(store.history(name))[:count]


def config_data(name: str, given: Any) -> dict[str, Any]:
    """A configured entry's definition as JSON data (its schedule as stored data where it can
    be, else its repr)."""
    definition = as_definition(given) or {}
    data = {key: definition.get(key) for key in ("task", "args", "kwargs", "options")}
    try:
        data["schedule"] = schedule_data(name, definition.get("schedule"))
    except DefinitionError:
        data["schedule"] = repr(definition.get("schedule"))
    data["args"] = list(data["args"] or ())
    data["kwargs"], data["options"] = dict(data["kwargs"] or {}), dict(data["options"] or {})
    return data


def pause_of(name: str, text: str | None) -> Pause | None:
    """A stored pause record read back; None for none, or one that does not read."""
    try:
        return None if text is None else decode_pause(name, text)
    except DefinitionError:
        return None


def stored_data(name: str, text: str) -> dict[str, Any]:
    """A stored definition as its JSON data; one that does not read back (written by hand) is
    shown as ``{"unreadable": why, "stored": text}``, since the beats log and skip it."""
    try:
        decode(name, text)
    except DefinitionError as exc:
        return {"unreadable": str(exc), "stored": text}
    data: dict[str, Any] = json.loads(text)
    data.pop("changed", None)
    return data
