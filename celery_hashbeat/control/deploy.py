"""What deploying a candidate ``beat_schedule`` changes (``hashbeat plan``, docs/design.md §19).

Both sides are built by the beats' own catalog (``plan_schedule``, entries/catalog.py) over the
same store entries, fences, floors, pauses and census: the *running* side from the definitions
the beats recorded under the digest they run (control/running.py), the *candidate* side from the
app's beat_schedule. Each entry a leader would run is compared by what decides its runs (task,
arguments, options, overlap, catch-up, bounds, its schedule as resolved, with the hash and the
balancer's terms drawn): an entry only one side has is added or removed; one whose own
definition changed is changed; one whose definition is the same but whose resolved schedule
differs is *moved* (a balanced entry placed elsewhere because others came or went). Each
changed or moved entry lists its next slots on both sides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from celery_hashbeat.control.running import Opaque, as_data
from celery_hashbeat.control.views import Planned, plan_schedule
from celery_hashbeat.schedules import hashcron, hashinterval

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.settings import Settings
    from celery_hashbeat.store import Store

#: Slots listed per side for each changed entry.
PLAN_SLOTS = 3


@dataclass(frozen=True)
class EntryChange:
    """One entry the deploy adds, removes, changes or moves."""

    name: str
    #: "added", "removed", "changed" or "moved".
    change: str
    #: Field -> (running, candidate), for the fields that differ ("resolved": the schedule
    #: with its hash terms drawn).
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    #: The next slots (epoch ms) the leader sends now, and would send after the deploy.
    slots_before: list[int] = field(default_factory=list)
    slots_after: list[int] = field(default_factory=list)
    #: Whether the balancer places its hash terms (docs/design.md §16).
    balanced: bool = False


@dataclass(frozen=True)
class DeployPlan:
    """The running schedule against the candidate."""

    #: The digest the compared beat runs, and the candidate's.
    running_digest: str
    candidate_digest: str
    changes: list[EntryChange]

    @property
    def changed(self) -> bool:
        return bool(self.changes) or self.unseen

    @property
    def unseen(self) -> bool:
        """Whether the schedules differ in what no definition shows: every entry reads the
        same, yet the digests differ, as when a file an entry reads (an ``ical:`` calendar,
        docs/design.md §20) changed since the beats read it."""
        return not self.changes and self.running_digest != self.candidate_digest


def compare(
    app: Celery,
    settings: Settings,
    running: Mapping[str, Any],
    candidate: Mapping[str, Any],
    store: Store,
    now_ms: int,
    running_digest: str,
) -> DeployPlan:
    """The plan of deploying ``candidate`` (beat_schedule) where the beats run ``running``
    (their recorded definitions), over ``store``'s entries, fences and census."""
    before = plan_schedule(app, settings, _buildable(running), store, now_ms)
    after = plan_schedule(app, settings, candidate, store, now_ms)
    names = sorted(before.catalog.entries.keys() | after.catalog.entries.keys())
    fences = store.fences(names)
    changes = []
    for name in names:
        old, new = before.catalog.entries.get(name), after.catalog.entries.get(name)
        slots_before = _slots(before, name, fences, now_ms)
        slots_after = _slots(after, name, fences, now_ms)
        if old is None or new is None:
            kind, fields = ("added", {}) if old is None else ("removed", {})
            balanced = _balanced(new if new is not None else old)
        else:
            fields = {
                key: (value, new_value)
                for (key, value), new_value in zip(
                    _decides(old, app).items(), _decides(new, app).values(), strict=True
                )
                if value != new_value
            }
            if not fields:
                continue
            same = _definition(before, name, app) == _definition(after, name, app)
            kind, balanced = ("moved" if same else "changed"), _balanced(new)
        changes.append(EntryChange(name, kind, fields, slots_before, slots_after, balanced))
    changes += _opaque_changes(running, candidate, before)
    digest = plan_schedule(app, settings, candidate, None, now_ms).catalog.digest()
    return DeployPlan(running_digest, digest, changes)


def _buildable(running: Mapping[str, Any]) -> dict[str, Any]:
    return {name: d for name, d in running.items() if not isinstance(d, Opaque)}


def _opaque_changes(
    running: Mapping[str, Any], candidate: Mapping[str, Any], before: Planned
) -> list[EntryChange]:
    """Recorded definitions that could not be written as data (custom schedule classes): by
    their text only."""
    changes = []
    for name, recorded in sorted(running.items()):
        if not isinstance(recorded, Opaque) or name in before.catalog.entries:
            continue
        if name not in candidate:
            changes.append(EntryChange(name, "removed"))
        elif as_data(name, candidate[name]) != {"opaque": str(recorded)}:
            now = as_data(name, candidate[name])
            changes.append(EntryChange(name, "changed", {"definition": (str(recorded), now)}))
    return changes


def _slots(planned: Planned, name: str, fences: Mapping[str, Any], now_ms: int) -> list[int]:
    return planned.next_slots(name, fences.get(name), now_ms, PLAN_SLOTS)


def _definition(planned: Planned, name: str, app: Celery) -> Any:
    """The definition entry ``name`` (or the entry it is a copy of) was built from, as data."""
    catalog = planned.catalog
    own = catalog.fanout.parent_of(name) or name
    given = catalog.configured.get(own, catalog.stored.get(own))
    return as_data(own, given)


def _decides(entry: Entry, app: Celery) -> dict[str, Any]:
    """What decides an entry's runs, field by field, in the order the plan shows them."""
    return {
        "task": entry.task,
        "args": list(entry.args),
        "kwargs": dict(entry.kwargs),
        "options": dict(entry.options),
        "overlap": str(entry.overlap),
        "catch_up": str(entry.catch_up),
        "catch_up_window_ms": entry.window,
        "bounds": list(entry.bounds),
        "max_runs": entry.max_runs,
        "schedule": entry.fingerprint,
        "resolved": resolved_text(entry, app),
    }


def resolved_text(entry: Entry, app: Celery) -> str | None:
    """An entry's schedule with its hash terms drawn: a hashcron's resolved expression, a
    hashinterval's offset; None for other kinds."""
    given = entry.schedule
    if isinstance(given, hashcron):
        return str(given.compile(entry.name, app.timezone))
    if isinstance(given, hashinterval):
        offset = getattr(entry.source, "offset", None)
        return None if offset is None else f"every {given.every}, +{offset} ms"
    return None


def _balanced(entry: Entry | None) -> bool:
    given = None if entry is None else entry.schedule
    return isinstance(given, hashcron) and given.offsets is not None
