"""The schedule's entries, as beat_schedule, the live workers and the balancer make them.

A Catalog turns definitions into entries: fanned-out entries into their copies (docs/design.md §11),
balanced hashcron entries placed by the balancer (§16), each built and checked; an entry that
cannot run is refused by name (logged, in a beat) and skipped, the others run. It knows nothing
of the lease or the store: what becomes of a new entry is the caller's (``added``).

It is the one build path (docs/design.md §8): the beat builds through it, and so do the ``hashbeat``
commands and ``ScheduleAdmin`` (``Catalog.preview``), which ask it an entry's next slots as a
leader plans them (``next_slots``), so what they show is what the beat does.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Container, Iterable, Mapping
from itertools import chain
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Protocol

from celery import beat

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.entries.balancing import Balancer
from celery_hashbeat.entries.building import Timing, as_definition, build_entry
from celery_hashbeat.entries.entry import Entry, StoredFence
from celery_hashbeat.entries.errors import EntryError
from celery_hashbeat.entries.fanout import FanOut, sub_name
from celery_hashbeat.entries.oneshot import OnceSlots
from celery_hashbeat.entries.sharing import SharedSlots, schedule_digest
from celery_hashbeat.expr.slots import to_datetime

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.schedules import hashcron
    from celery_hashbeat.settings import Settings

logger = SCHEDULER


class PlannedFence(StoredFence, Protocol):
    """What planning reads of the fence the store keeps for an entry (store.values.Fence)."""

    @property
    def slot(self) -> int: ...

    @property
    def runs(self) -> int: ...


#: The worker a fanned-out entry is built for when it has no copy now, to see what it runs.
PROBE_NODE = "celery@probe"


def log_refusal(name: str, message: str) -> None:
    """How a beat refuses an entry that cannot run: one line in its log, naming the entry."""
    logger.error("beat: skipping %s", message)


def ignore_added(entry: Entry, now_ms: int) -> None:
    """What a catalog that no beat runs does with a new entry: nothing (no lease, no anchor)."""


class Catalog:
    """Every entry of one scheduler, by name, and the configured ones that cannot run."""

    def __init__(
        self,
        app: Celery,
        settings: Settings,
        now: Callable[[], int],
        added: Callable[[Entry, int], None],
        refused: Callable[[str, str], None] = log_refusal,
    ) -> None:
        self.app = app
        self.settings = settings
        self.entries: dict[str, Entry] = {}
        #: Names of configured entries that could not run: their fences are kept.
        self.broken: set[str] = set()
        self.shared = SharedSlots(app)
        self.fanout = FanOut()
        self.balancer = Balancer(settings.balance, str(app.timezone), self.fanout.parents)
        self._now = now
        self._added = added
        #: Told the name and the message of each entry that cannot run.
        self._refused = refused
        #: The configuration's entries (beat_schedule and Celery's own), by name.
        self.configured: dict[str, Any] = {}
        #: The entries kept in the store (docs/design.md §13), by name; a name the configuration
        #: also has is the configuration's.
        self.stored: dict[str, Any] = {}
        #: The configuration's one-shots whose instant had passed when they were built.
        self.passed_once: set[str] = set()

    def merge(self, schedule: Mapping[str, Any]) -> None:
        """Take ``schedule`` as the whole configuration: entries not in it (nor in the store)
        leave."""
        self.configured = dict(schedule)
        for name in self.stored.keys() & self.configured.keys():
            logger.error(
                "beat: the store entry %r has the name of a beat_schedule entry, which wins; "
                "remove the store entry (`hashbeat remove %s`) or rename one of them",
                name,
                name,
            )
        everything = {**self.stored, **self.configured}
        self.fanout.drop([name for name in self.fanout.subs if name not in everything])
        plain = self._expand(everything)
        self.deactivate([name for name in self.entries if name not in plain])
        if self.broken:
            self.broken.intersection_update({*plain, *everything})
        self._build(plain)

    def update(self, definitions: Mapping[str, Any]) -> None:
        """Add or replace entries of the configuration."""
        self.configured.update(definitions)
        self._build(self._expand(definitions))

    def restock(self, changed: Mapping[str, Any | None], full: bool) -> list[str]:
        """Take the store entries changed (None: removed, or unreadable); ``full`` means every
        store entry is in ``changed``. Returns the entries taken out."""
        if full:
            changed = {**dict.fromkeys(self.stored), **changed}
        for name, definition in changed.items():
            if definition is None:
                self.stored.pop(name, None)
            else:
                self.stored[name] = definition
        mine = {name: d for name, d in changed.items() if name not in self.configured}
        gone = [name for name, definition in mine.items() if definition is None]
        doomed = [n for g in gone for n in (g, *self.fanout.subs.get(g, ())) if n in self.entries]
        self.fanout.drop(gone)
        self.deactivate(doomed)
        # A changed worker list drops copies too: they are taken out like removed entries.
        dropped: list[str] = []
        self._build(self._expand({n: d for n, d in mine.items() if d is not None}, dropped))
        return doomed + sorted(set(dropped) - set(doomed))

    def regroup(self, nodes: tuple[str, ...]) -> set[str]:
        """Fan the ``"*"`` entries out to ``nodes``; the copies of workers that left."""
        expansion = self.fanout.regroup(nodes)
        self.deactivate(expansion.gone)
        self._build(expansion.plain)
        return expansion.gone

    def deactivate(self, names: Iterable[str]) -> None:
        """Take entries out; their places in the scheduler's queue are skipped. Balanced entries
        whose values move with their departure are built again."""
        names = list(names)
        for name in names:
            old = self.entries.pop(name, None)
            if old is not None:
                old.active = False
                self.passed_once.discard(name)
        placed = self.balancer.drop(names)
        if placed.moved:
            self._make(placed.moved.items(), placed.schedules)

    def count(self) -> int:
        """The entries in the schedule, as the beats' ``hashbeat_entries`` and the commands
        count them: each definition once by name, the configuration's (with Celery's own) and
        the store's (one the configuration also names counts once), a fanned-out entry once
        whatever its copies, one that cannot run too. The same on every beat, leader or not."""
        configured = self.configured
        return len(configured) + sum(1 for name in self.stored if name not in configured)

    def digest(self) -> str:
        """What this beat runs, in a few characters. Copies on every live worker are left out:
        beats that have not seen the same census still run the same configuration."""
        entries = self.entries
        if self.fanout.every_worker:
            dynamic = self.fanout.is_dynamic
            entries = {name: entry for name, entry in entries.items() if not dynamic(name)}
        return schedule_digest(entries)

    @classmethod
    def preview(
        cls,
        app: Celery,
        settings: Settings,
        now_ms: int,
        configured: Mapping[str, Any],
        stored: Mapping[str, Any] | None = None,
        nodes: tuple[str, ...] | None = None,
    ) -> tuple[Catalog, dict[str, str]]:
        """The catalog a leader holds, built without one: ``configured`` (beat_schedule) and
        Celery's own entries, then the ``stored`` definitions, the ``"*"`` entries fanned out to
        ``nodes`` (the store's roster; None before any census). With it, the message of each
        entry it refused, by name, as a beat would log it (kept up as the catalog refuses
        more: those in ``broken`` cannot run now)."""
        refusals: dict[str, str] = {}
        catalog = cls(app, settings, lambda: now_ms, ignore_added, refusals.__setitem__)
        catalog.fanout.nodes = nodes
        catalog.merge(configured)
        catalog.install_defaults()
        if stored:
            catalog.restock(stored, full=True)
        return catalog, refusals

    def install_defaults(self) -> None:
        """Add Celery's own entries (``celery.backend_cleanup`` where the result backend needs
        it), by Celery's own rule, as a beat adds them after beat_schedule."""
        scheduler = SimpleNamespace(app=self.app, update_from_dict=self.update)
        beat.Scheduler.install_default_entries(scheduler, self.entries)  # type: ignore[arg-type]

    @classmethod
    def trial(
        cls,
        app: Celery,
        settings: Settings,
        now_ms: int,
        name: str,
        definition: Any,
        *,
        written: bool = False,
    ) -> Entry:
        """``definition`` built alone, as a catalog builds it (fanned out, a ``"*"`` or empty
        worker list to a placeholder worker), to check it and to see what it runs; a refusal
        raises EntryError with the message a beat would log. ``written``: it is being written
        now, so a one-shot the beats would never send (its instant past, beyond what its
        catch-up sends) is refused too (docs/design.md §21)."""
        refusals: dict[str, str] = {}
        alone = cls(app, settings, lambda: now_ms, ignore_added, refusals.__setitem__)
        alone.fanout.nodes = (PROBE_NODE,)
        alone.update({name: definition})
        mapping = as_definition(definition)
        if not alone.entries and not refusals and mapping is not None:
            alone.update({name: {**mapping, "workers": [PROBE_NODE]}})
        if refusals:
            probe = sub_name(name, PROBE_NODE)
            message = next(iter(refusals.values()))
            raise EntryError(message.replace(f"entry {probe!r}", f"entry {name!r}"))
        entry = alone.entries[min(alone.entries)]
        if written:
            refuse_past_once(name, entry, now_ms)
        return entry

    def counts_from(self, name: str, fence_ms: int | None, floors: Mapping[str, int]) -> int | None:
        """Where entry ``name``'s slots count from as a leader plans them: its fence, unless it
        (or the entry it is a copy of) was added, updated or resumed later (its floor), so
        that nothing from before then is ever caught up (docs/design.md §13). A one-shot whose
        slot was claimed stays done whatever its floor (§21)."""
        floor = floors.get(name) if floors else None
        if floor is not None and is_done_once(self.entries.get(name), fence_ms):
            return fence_ms
        if floor is None and floors:
            floor = floors.get(self.fanout.parent_of(name) or "")
        if floor is None or (fence_ms is not None and fence_ms >= floor):
            return fence_ms
        return floor

    def refuse_missed_once(
        self, names: Iterable[str], fences: Mapping[str, PlannedFence], now_ms: int
    ) -> None:
        """As a leader plans them: refuse the beat_schedule one-shots among ``names`` whose
        instant had passed when they were read, unsent, and that their catch-up would never
        send, by name, as a written one is refused (docs/design.md §21). One the store says was
        sent is done."""
        refused = []
        for name in [name for name in names if name in self.passed_once]:
            entry, fence = self.entries[name], fences.get(name)
            if is_done_once(entry, None if fence is None else fence.slot):
                continue
            try:
                refuse_past_once(name, entry, now_ms)
            except EntryError as exc:
                self._refuse(name, str(exc))
                refused.append(name)
        self.deactivate(refused)

    def held(self, name: str, paused: Container[str]) -> bool:
        """Whether entry ``name`` is paused by an operator: itself, or the entry it is a copy
        of (``paused``: the names paused in the store). A leader sends nothing of it."""
        return bool(paused) and (name in paused or (self.fanout.parent_of(name) or "") in paused)

    def next_slots(
        self,
        name: str,
        fence: PlannedFence | None,
        floors: Mapping[str, int],
        now_ms: int,
        count: int,
        paused: Container[str] = (),
    ) -> list[int]:
        """The next ``count`` slots a leader sends of entry ``name`` (none for one it does not
        run, nor for one ``held`` by a pause), planned from the store's ``fence`` and the
        operators' ``floors`` as the leader plans them: a schedule the store has not anchored
        (or fenced for another schedule) is anchored first, at its floor or now; a slot missed
        since the fence is due now; none past ``max_runs`` (the run count kept by the fence)."""
        entry = self.entries.get(name)
        if entry is None or self.held(name, paused):
            return []
        fence_ms = None if fence is None else fence.slot
        if entry.needs_anchor(fence):
            fence_ms = self.counts_from(name, None, floors) or now_ms
        since = self.counts_from(name, fence_ms, floors)
        return upcoming(entry, since, 0 if fence is None else fence.runs, now_ms, count)

    def _expand(
        self, schedule: Mapping[str, Any], dropped: list[str] | None = None
    ) -> dict[str, Any]:
        """``schedule`` with each fanned-out entry replaced by its copies; one that cannot be
        fanned out is logged by name and skipped."""
        expansion = self.fanout.expand(schedule)
        for name, error in expansion.broken.items():
            self._refuse(name, error)
        self.deactivate(expansion.gone)
        if dropped is not None:
            dropped.extend(expansion.gone)
        return expansion.plain

    def _build(self, definitions: Mapping[str, Any]) -> None:
        """Build ``definitions`` (added or replaced), and the balanced entries they moved."""
        placed = self.balancer.take(definitions)
        self._make(chain(definitions.items(), placed.moved.items()), placed.schedules)

    def _make(self, definitions: Iterable[tuple[str, Any]], placed: Mapping[str, hashcron]) -> None:
        """Build entries from (name, definition) pairs, balanced ones with the schedules
        ``placed`` for them; those that cannot run are refused and taken out."""
        now = self._now()
        failed = []
        entries = self.entries
        #: Whether any entry was built yet: at start none was, and none need be looked up (the
        #: names given are distinct).
        rebuilding = bool(entries)
        timings: dict[tuple[int, bool], Timing] = {}  # by placed schedule, held by ``placed``
        for name, definition in definitions:
            try:
                entry = build_entry(
                    name, definition, self.settings, self.shared, now, placed.get(name), timings
                )
            except EntryError as exc:
                self._refuse(name, str(exc))
                failed.append(name)
                continue
            self.broken.discard(name)
            source = entry.source
            if type(source) is OnceSlots and source.instant <= now and name in self.configured:
                self.passed_once.add(name)
            current = entries.get(name) if rebuilding else None
            if current is not None:
                if current.same_as(entry):
                    current.hold_schedule_of(entry)
                    continue
                current.active = False
                # A changed entry is the same entry: its runs so far still count.
                entry.last_slot, entry.total_run_count = current.last_slot, current.total_run_count
            entries[name] = entry
            self._added(entry, now)
        if failed:
            self.deactivate(failed)

    def _refuse(self, name: str, message: str) -> None:
        self._refused(name, message)
        self.broken.add(name)


def refuse_past_once(name: str, entry: Entry, now_ms: int) -> None:
    """A one-shot written with an instant that has passed is refused unless its catch-up
    sends it late (``catch_up`` latest or all, and within any ``catch_up_window``)."""
    source = entry.source
    if not isinstance(source, OnceSlots):
        return
    if source.instant <= now_ms and not upcoming(entry, None, 0, now_ms, 1):
        when = to_datetime(source.instant).isoformat(timespec="seconds")
        window = "" if entry.window is None else f", window {entry.window // 1000}s"
        raise EntryError(
            f"entry {name!r}: its one-shot instant, {when}, has passed and its catch-up "
            f"({entry.catch_up}{window}) would never send it: give a later instant, or "
            f"catch_up 'latest' to send it now"
        )


def is_done_once(entry: Entry | None, fence_ms: int | None) -> bool:
    """Whether ``entry`` is a one-shot whose one slot the fence ``fence_ms`` claimed."""
    source = None if entry is None else entry.source
    return isinstance(source, OnceSlots) and fence_ms == source.instant


def upcoming(entry: Entry, since_ms: int | None, runs: int, now_ms: int, count: int) -> list[int]:
    """The next ``count`` slots ``entry`` sends after ``runs`` sends, its slots counting from
    ``since_ms``: planned on a copy with the entry's own steps (catch-up, window, a schedule's
    ``is_due``, ``start``/``end``), cut at ``max_runs``; none once it has no more."""
    if entry.max_runs is not None:
        count = min(count, entry.max_runs - runs)
    plan = copy.copy(entry)
    slots: list[int] = []
    try:
        if count > 0:
            plan.start(since_ms, now_ms)
        while len(slots) < count and plan.slot is not None:
            if plan.slot <= now_ms and not plan.ready(now_ms):
                continue  # the catch-up or the schedule's is_due moved it on
            slots.append(plan.slot)
            plan.advance(plan.slot, now_ms)
    except Exception:  # no more slots, or none it can say now (the beat asks again later)
        pass
    return slots
