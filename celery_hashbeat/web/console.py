"""What the console shows, read through the layers the beats use (docs/design.md §18): the entries
from ``ScheduleAdmin`` (their next slots as the leader plans them), the per-worker copies and the
resolved schedules from ``plan_schedule`` (the catalog, the one build path), history, the lease
and the beats seen from the store. The standalone app and the Django admin both render these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from celery_hashbeat.control.admin import EntryView, Planned, ScheduleAdmin, plan_schedule
from celery_hashbeat.expr.balance import shape_of
from celery_hashbeat.expr.errors import CronSyntaxError
from celery_hashbeat.observe.history import Record
from celery_hashbeat.observe.history import decode as decode_record

if TYPE_CHECKING:
    from celery_hashbeat.store.base import BeatInfo, LeaseInfo

#: Next slots listed per copy of a fanned-out entry.
COPY_SLOTS = 3

#: History records shown on an entry's page (the store keeps up to 100).
HISTORY = 100

#: The states the entries page filters by.
STATES = ("active", "paused", "unreadable", "done")


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


def schedule_text(data: Any) -> str:
    """A stored schedule (control/definitions.py's JSON data) as it was written."""
    if not isinstance(data, dict):
        return str(data)
    if "hashcron" in data:
        zone = f" ({data['tz']})" if data.get("tz") else ""
        return f"hashcron {data['hashcron']}{zone}"
    for kind in ("hashinterval", "every"):
        if kind in data:
            return f"{kind} {data[kind]:g}s"
    if "crontab" in data:
        order = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
        return "crontab " + " ".join(str(data["crontab"].get(key, "*")) for key in order)
    if "solar" in data:
        solar = data["solar"]
        return f"solar {solar.get('event')} {solar.get('lat')},{solar.get('lon')}"
    return str(data)


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
    """One reading of the schedule, for one page: built once, then asked."""

    def __init__(self, admin: ScheduleAdmin) -> None:
        self.admin = admin
        self.views = admin.list()
        self.now_ms = int(admin.clock() * 1000)
        configured = dict(admin.app.conf.beat_schedule or {})  # finalized by list()
        self.planned = plan_schedule(
            admin.app, admin.settings, configured, admin.store, self.now_ms
        )
        self.zone = str(admin.app.timezone)

    def overview(self) -> Overview:
        store = self.admin.store
        return Overview(store.leader(), store.beats(), self.now_ms)

    def rows(self, state: str = "", search: str = "") -> list[Row]:
        """Every entry, its copies under it, keeping those in ``state`` whose name has
        ``search`` (or one of whose copies' names has it)."""
        needle = search.strip().lower()
        subs = self.planned.catalog.fanout.subs
        copies = sorted(n for v in self.views for n in subs.get(v.name, ()))
        fences = self.admin.store.fences(copies) if copies else {}
        rows = []
        for view in self.views:
            row = self._row(view, fences, sorted(subs.get(view.name, ())))
            names = [row.name, *(copy.name for copy in row.copies)]
            if state and row.state != state:
                continue
            if needle and not any(needle in name.lower() for name in names):
                continue
            rows.append(row)
        return rows

    def view(self, name: str) -> EntryView | None:
        return next((view for view in self.views if view.name == name), None)

    def row(self, name: str) -> Row | None:
        found = [row for row in self.rows() if row.name == name]
        return found[0] if found else None

    def history(self, name: str) -> list[Record]:
        """The entry's newest records, and those of its copies, newest first."""
        names = [name, *sorted(self.planned.catalog.fanout.subs.get(name, ()))]
        records = [
            record
            for each in names
            for record in map(decode_record, self.admin.store.history(each, HISTORY))
            if record is not None
        ]
        return sorted(records, key=lambda record: record.at, reverse=True)[:HISTORY]

    def same_shape(self, name: str) -> list[str]:
        """The entries whose schedules have the shape of ``name``'s, ``name`` first."""
        view = self.view(name)
        if view is None:
            return []
        key = shape_key(view.definition)
        others = [v.name for v in self.views if v.name != name and shape_key(v.definition) == key]
        return [name, *others]

    def slots(self, name: str, count: int) -> list[int]:
        """Up to ``count`` next slots of an entry (its copies' together), as the leader plans."""
        names = sorted(self.planned.catalog.fanout.subs.get(name, (name,)))
        fences = self.admin.store.fences(names)
        found = [
            slot
            for each in names
            for slot in self.planned.next_slots(each, fences.get(each), self.now_ms, count)
        ]
        return sorted(found)[:count]

    def _row(self, view: EntryView, fences: dict[str, Any], copies: list[str]) -> Row:
        definition = view.definition
        pause = view.pause
        last = view.recent[0] if view.recent else None
        sent = next((r for r in view.recent if r.lateness_ms is not None), None)
        if "unreadable" in definition:
            state = "unreadable"
        elif view.paused:
            state = "paused"
        elif not view.next_slots:
            state = "done"
        else:
            state = "active"
        return Row(
            name=view.name,
            source=view.source,
            written=schedule_text(definition.get("schedule")),
            resolved=resolved_text(self.planned, view.name, self.zone),
            next_slots=view.next_slots,
            state=state,
            reason=pause.reason if pause is not None and pause.paused else "",
            paused_at=pause.at if pause is not None and pause.paused else None,
            who=str(getattr(pause, "who", "") or ""),
            last=last,
            lateness_ms=None if sent is None else sent.lateness_ms,
            copies=[self._copy(view, name, fences.get(name)) for name in copies],
        )

    def _copy(self, parent: EntryView, name: str, fence: Any) -> Row:
        slots = self.planned.next_slots(name, fence, self.now_ms, COPY_SLOTS)
        return Row(
            name=name,
            source=parent.source,
            written=schedule_text(parent.definition.get("schedule")),
            resolved=resolved_text(self.planned, name, self.zone),
            next_slots=slots,
            state="paused" if parent.paused else ("active" if slots else "done"),
            parent=parent.name,
        )
