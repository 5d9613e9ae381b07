"""What the console shows, read through the layers the beats use (docs/design.md §18): the entries
from ``ScheduleAdmin`` (their next slots as the leader plans them), the per-worker copies and the
resolved schedules from its plan (the catalog, the one build path), history, the lease and the
beats seen from the store. The standalone app and the Django admin both render these.

A plan of a large schedule takes a second or more to build, so ``PlanCache`` keeps it between
requests and takes the store's changes into it as a beat does (only the entries changed are
built again); next slots are planned from it, from the store's current fences."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.audit import Change
from celery_hashbeat.control.polling import ControlState
from celery_hashbeat.control.views import EntryView, Planned, follow
from celery_hashbeat.control.words import entry_schedule_text, schedule_text
from celery_hashbeat.expr.balance import shape_of
from celery_hashbeat.expr.errors import CronSyntaxError
from celery_hashbeat.observe.history import Record
from celery_hashbeat.web.spread import MOST_ENTRIES, Spread, spread

if TYPE_CHECKING:
    from celery_hashbeat.store import Store
    from celery_hashbeat.store.values import BeatInfo, LeaseInfo

#: Next slots listed per copy of a fanned-out entry.
COPY_SLOTS = 3

#: History records shown on an entry's page (the store keeps up to 100).
HISTORY = 100

#: The states the entries page filters by.
STATES = ("active", "paused", "unreadable", "done")

#: A kept plan is built again after this long even if nothing it follows changed (seconds): a
#: safety net, since the plan depends only on the definitions and the census, which it follows.
PLAN_AGE_S = 900.0


@dataclass(frozen=True)
class Row:
    """One line of the entries page: an entry, or (``parent`` set) a per-worker copy of one."""

    name: str
    source: str
    written: str
    resolved: str
    next_slots: list[int]
    state: str
    reason: str = ""
    paused_at: int | None = None
    who: str = ""
    last: Record | None = None
    lateness_ms: int | None = None
    parent: str | None = None
    copies: list[Row] = field(default_factory=list)


@dataclass(frozen=True)
class Overview:
    """The beats as the store sees them: the lease holder and every beat's last heartbeat."""

    leader: LeaseInfo | None
    beats: list[BeatInfo]
    now_ms: int


class PlanCache:
    """The last plan, kept between requests and followed as a beat follows the store: what
    operators changed since the last request (definitions, pauses, floors) is taken into the
    kept catalog in place (``follow``), and the entries it names are planned again; a new
    census, or age (PLAN_AGE_S), builds the plan again. Each entry's view and next slot is kept
    too, and planned again when its next slot has come (a slot sent moves its entry's fence,
    and only then). The plan changes in place: its users hold the console's lock while they
    read it (one request at a time)."""

    def __init__(self) -> None:
        self._controls = ControlState(report_unreadable=False)
        self._views: dict[str, EntryView] = {}
        #: Entries whose views a change made stale.
        self._stale: set[str] = set()
        self._planned: Planned | None = None
        #: The store the kept plan follows (another one, as a Django admin given another app
        #: finds, builds it afresh).
        self._store: Store | None = None
        self._at = 0.0
        self._lock = threading.Lock()

    def planned(self, admin: ScheduleAdmin) -> Planned:
        with self._lock:
            planned = self._planned
            fresh = time.monotonic() - self._at <= PLAN_AGE_S
            if planned is not None and admin.store is self._store and fresh:
                roster = admin.store.roster()
                known = None if planned.roster is None else planned.roster.nodes
                if (None if roster is None else roster.nodes) == known:
                    planned, moved = follow(planned, self._controls, admin.store)
                    self._planned = dataclasses.replace(planned, roster=roster)
                    self._stale |= moved
                    return self._planned
            self._controls, self._store = ControlState(report_unreadable=False), admin.store
            self._planned = admin.plan(self._controls)
            self._at = time.monotonic()
            self._views, self._stale = {}, set()
            return self._planned

    def views(self, admin: ScheduleAdmin, planned: Planned, now_ms: int) -> list[EntryView]:
        """Every entry with its next slot, from ``planned`` (the one ``planned`` returned)."""
        with self._lock:
            if not self._views:
                self._views = {
                    view.name: view for view in admin.list(recent=0, slots=1, planned=planned)
                }
            else:
                due = {
                    n for n, v in self._views.items() if v.next_slots and v.next_slots[0] <= now_ms
                }
                due |= self._stale
                if due:
                    fresh = admin.list(names=sorted(due), recent=0, slots=1, planned=planned)
                    listed = {view.name: view for view in fresh}
                    for name in due - listed.keys():  # removed
                        self._views.pop(name, None)
                    added = listed.keys() - self._views.keys()
                    self._views.update(listed)
                    if added:  # in order of name, as the list is
                        self._views = dict(sorted(self._views.items()))
            self._stale = set()
            return list(self._views.values())


def resolved_text(planned: Planned, name: str, zone: str) -> str:
    """The schedule the leader runs for ``name``: a hashcron's ``H`` values drawn for its key."""
    entry = planned.catalog.entries.get(name)
    schedule = getattr(entry, "schedule", None)
    identity = getattr(schedule, "identity", None)
    if identity is None:
        return ""
    try:
        resolved = identity(name, zone)
    except (CronSyntaxError, ValueError):
        return ""
    return "" if resolved is None else str(resolved[0])


def shape_key(definition: dict[str, Any]) -> str:
    """What groups entries that compete for the same slots: a hashcron's shape, else the text."""
    data = definition.get("schedule")
    if isinstance(data, dict) and isinstance(data.get("hashcron"), str):
        try:
            return "hashcron " + shape_of(data["hashcron"])
        except CronSyntaxError:
            pass
    return schedule_text(data)


class Console:
    """One reading of the schedule, for one page: every entry with its next slot (no history:
    that is read for the rows a page shows), then asked."""

    def __init__(self, admin: ScheduleAdmin, cache: PlanCache) -> None:
        self.admin = admin
        self.now_ms = int(admin.clock() * 1000)
        self.planned = cache.planned(admin)
        self.views = cache.views(admin, self.planned, self.now_ms)
        self.zone = str(admin.app.timezone)

    def overview(self) -> Overview:
        store = self.admin.store
        return Overview(store.leader(), store.beats(), self.now_ms)

    def rows(self, state: str = "", search: str = "") -> list[Row]:
        """Every entry, its copies under it, keeping those in ``state`` whose name has
        ``search`` (or one of whose copies' names has it)."""
        needle = search.strip().lower()
        subs = self.planned.catalog.fanout.subs
        rows = []
        for view in self.views:
            copies = sorted(subs.get(view.name, ()))
            if state and _state(view) != state:
                continue
            if needle and not any(needle in name.lower() for name in (view.name, *copies)):
                continue
            rows.append(self._row(view, copies))
        return rows

    def with_outcomes(self, rows: list[Row]) -> list[Row]:
        """``rows`` with their resolved schedules, their copies' next slots and their last
        outcomes: worked out for the rows a page shows alone."""
        copies = [copy.name for row in rows for copy in row.copies]
        fences = self.admin.store.fences(copies) if copies else {}
        done = []
        for row in rows:
            recent = self.admin.recent(row.name)
            sent = next((r for r in recent if r.lateness_ms is not None), None)
            done.append(
                dataclasses.replace(
                    row,
                    resolved=resolved_text(self.planned, row.name, self.zone),
                    last=recent[0] if recent else None,
                    lateness_ms=None if sent is None else sent.lateness_ms,
                    copies=[
                        self._copy(row, copy.name, fences.get(copy.name)) for copy in row.copies
                    ],
                )
            )
        return done

    def entry(self, name: str) -> tuple[Row, EntryView] | None:
        """One entry in full: its next slots and outcomes, as ``hashbeat show`` tells them."""
        found = self.admin.list(names=[name], planned=self.planned)
        if not found:
            return None
        view = found[0]
        row = self._row(view, sorted(self.planned.catalog.fanout.subs.get(name, ())))
        return self.with_outcomes([row])[0], view

    def history(self, name: str) -> list[Record]:
        """The entry's newest records, and those of its copies, newest first."""
        names = [name, *sorted(self.planned.catalog.fanout.subs.get(name, ()))]
        records = [record for each in names for record in self.admin.recent(each, HISTORY)]
        return sorted(records, key=lambda record: record.at, reverse=True)[:HISTORY]

    def audit(self, name: str) -> list[Change]:
        """The entry's newest changes in the store's audit trail, newest first."""
        return self.admin.audit(name, HISTORY)

    def same_shape(self, name: str) -> list[str]:
        """The entries whose schedules have the shape of ``name``'s, ``name`` first."""
        view = next((view for view in self.views if view.name == name), None)
        if view is None:
            return []
        key = shape_key(view.definition)
        others = [v.name for v in self.views if v.name != name and shape_key(v.definition) == key]
        return [name, *others]

    def spread(self, name: str) -> Spread:
        """When ``name`` and the entries of its shape fire, with their fences read in one call."""
        shape = self.same_shape(name)[:MOST_ENTRIES]
        subs = self.planned.catalog.fanout.subs
        fences = self.admin.store.fences([n for s in shape for n in subs.get(s, (s,))])
        return spread(shape, lambda each, count: self.slots(each, count, fences), self.now_ms)

    def slots(self, name: str, count: int, fences: Mapping[str, Any] | None = None) -> list[int]:
        """Up to ``count`` next slots of an entry (its copies' together), as the leader plans,
        from ``fences`` (read from the store when not given)."""
        names = sorted(self.planned.catalog.fanout.subs.get(name, (name,)))
        if fences is None:
            fences = self.admin.store.fences(names)
        found = [
            slot
            for each in names
            for slot in self.planned.next_slots(each, fences.get(each), self.now_ms, count)
        ]
        return sorted(found)[:count]

    def _row(self, view: EntryView, copies: list[str]) -> Row:
        pause = view.pause if view.paused else None
        return Row(
            name=view.name,
            source=view.source,
            written=entry_schedule_text(view.definition),
            resolved="",  # drawn by with_outcomes, for the rows a page shows
            next_slots=view.next_slots,
            state=_state(view),
            reason=pause.reason if pause is not None else "",
            paused_at=pause.at if pause is not None else None,
            who=pause.who if pause is not None else "",
            copies=[
                Row(copy, view.source, "", "", [], "paused" if pause else "", parent=view.name)
                for copy in copies
            ],
        )

    def _copy(self, parent: Row, name: str, fence: Any) -> Row:
        slots = self.planned.next_slots(name, fence, self.now_ms, COPY_SLOTS)
        return Row(
            name=name,
            source=parent.source,
            written=parent.written,
            resolved=resolved_text(self.planned, name, self.zone),
            next_slots=slots,
            state="paused" if parent.state == "paused" else ("active" if slots else "done"),
            parent=parent.name,
        )


def _state(view: EntryView) -> str:
    if "unreadable" in view.definition:
        return "unreadable"
    if view.paused:
        return "paused"
    return "active" if view.next_slots else "done"
