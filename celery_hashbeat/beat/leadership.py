"""Leading: what a beat does as it becomes leader and as the store tells it of changes.

A new leader reads every entry's fence and plans each entry from it (DESIGN.md §5), anchoring
what the store has not seen; as leader it keeps the worker census and the balanced assignment in
the store (§11, §16). Every beat applies what operators changed (§13): entries added, updated or
removed, pauses and resumes, each planned from where its slots now count (its floor), so nothing
from before a change is ever caught up. A mixin on ``Scheduler``'s own state, like ``sending``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.beat.compat import serve_runs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from celery_hashbeat.beat.ahead import Ahead
    from celery_hashbeat.beat.lease import Lease
    from celery_hashbeat.beat.slotqueue import SlotQueue
    from celery_hashbeat.control.polling import Changed, Controls
    from celery_hashbeat.entries.balancing import Balancer
    from celery_hashbeat.entries.catalog import Catalog
    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.entries.fanout import FanOut, WorkerCensus
    from celery_hashbeat.observe.watch import Watch
    from celery_hashbeat.store.base import Fence, Store

#: The scheduler's logger (see ``sending``).
logger = SCHEDULER


class Leading:
    """How ``Scheduler`` takes over and follows the store's changes (a mixin)."""

    token: str
    watch: Watch
    entries: dict[str, Entry]
    broken: set[str]
    _store: Store | None
    _lease: Lease
    _queue: SlotQueue
    _owed: dict[str, int]
    _parked: dict[str, Entry]
    _catalog: Catalog
    _fanout: FanOut
    _balancer: Balancer
    _balance_shared: int
    _census: WorkerCensus
    _controls: Controls
    _ahead: Ahead
    now_ms: Callable[[], int]
    _plan: Callable[..., Any]
    _due_at: Callable[[Entry, int], int]
    _requeue: Callable[[Entry, int], None]
    _send_triggers: Callable[[Store], None]

    def _take_over(self, store: Store) -> None:
        """As the new leader, read every entry's fence and catch up from it (DESIGN.md §5).

        A chained entry (an interval) the store has never seen, or any entry whose schedule
        changed, is anchored at now first: its slots count from there whichever beat leads
        next, so an interval keeps its phase across leader changes and a changed schedule is
        never caught up into the past.
        """
        now = self.now_ms()
        self._balance_shared = -1  # a new leader's assignment wins (DESIGN.md §16)
        try:
            if not self._controls.known:
                self._apply(self._controls.poll(store), now)
            if self._fanout.every_worker:
                roster = store.roster()
                if roster is not None and roster.nodes != self._fanout.nodes:
                    self._regroup(roster.nodes)
                self._census.due_now()
            fences = store.fences()
            serve_runs(self.entries, fences)
            gone = [name for name in fences if name not in self.entries and name not in self.broken]
            if gone:
                store.forget(self.token, gone)
            fresh = {
                name: (now, entry.fingerprint)
                for name, entry in self.entries.items()
                if entry.needs_anchor(fences.get(name))
            }
            if fresh:
                fences.update(store.anchor(self.token, fresh))
        except Exception as exc:
            self._lease.failed(exc, time.monotonic())
            return
        self._queue.refill(self._resumed(fences, now))
        self._parked.clear()
        self._owed.clear()
        self._ahead.reset()
        self._controls.due = 0.0  # the next tick sends the triggers that waited for a leader
        logger.debug("beat: leading %d entries (%d forgotten)", len(self._queue), len(gone))

    def _resumed(self, fences: Mapping[str, Fence], now: int) -> Iterator[tuple[Entry, int]]:
        """Every entry planned from its fence, with when it is next due."""
        plan, resume, due_at = self._plan, self._resume, self._due_at
        for name, entry in self.entries.items():
            plan(entry, now, resume, entry, fences.get(name), now)
            yield entry, due_at(entry, now)

    def _share_balance(self) -> None:
        """As leader, keep the balanced assignment in the store, where every beat and the
        ``hashbeat`` commands read the values in use."""
        store = self._store
        assert store is not None
        version = self._balancer.version
        try:
            if store.share(self.token, "balance", self._balancer.stored_form()):
                self._balance_shared = version
        except Exception as exc:
            self._lease.failed(exc, time.monotonic())

    def _take_census(self) -> None:
        """As leader, ask which workers are alive (at most once per refresh, off this thread);
        keep a changed answer in the store and fan the ``"*"`` entries out to it."""
        nodes = self._census.poll()
        if nodes is None or nodes == self._fanout.nodes:
            return
        store = self._store
        assert store is not None
        try:
            if not store.set_roster(self.token, nodes, self.now_ms()):
                return
        except Exception as exc:
            self._lease.failed(exc, time.monotonic())
            return
        self._regroup(nodes)

    def _regroup(self, nodes: tuple[str, ...]) -> None:
        """Fan the ``"*"`` entries out to ``nodes``: a worker that joined starts at its next
        slot, one that left gets no more runs (and its fences go, so a return starts afresh)."""
        gone = self._catalog.regroup(nodes)
        if gone and self._lease.leader and self._store is not None:
            try:
                self._store.forget(self.token, gone)
            except Exception as exc:
                self._lease.failed(exc, time.monotonic())

    def _resume(self, entry: Entry, fence: Fence | None, now: int) -> None:
        """Plan ``entry`` from its fence; a slot this beat claimed and never sent is sent now
        (its claim is this beat's own, so claiming it again succeeds)."""
        if (
            fence is not None
            and fence.token == self.token
            and self._owed.get(entry.name) == fence.slot
        ):
            entry.slot, entry.pending = fence.slot, None
            return
        entry.start(self._from(entry, None if fence is None else fence.slot), now)

    def _from(self, entry: Entry, fence: int | None) -> int | None:
        """Where ``entry``'s slots count from: its fence, unless it was added, updated or
        resumed later (its floor), so that nothing from before then is ever caught up."""
        floors = self._controls.floors
        floor = floors.get(entry.name) if floors else None
        if floor is None and floors:
            floor = floors.get(self._fanout.parent_of(entry.name) or "")
        return fence if floor is None or (fence is not None and fence >= floor) else floor

    def _anchor(self, entry: Entry, now: int) -> None:
        """Plan an entry added or changed while leading, from its anchor in the store."""
        store = self._store
        assert store is not None
        instant = self._from(entry, None) or now
        try:
            anchored = store.anchor(self.token, {entry.name: (instant, entry.fingerprint)})
            fence = anchored.get(entry.name)
        except Exception as exc:
            self._lease.failed(exc, time.monotonic())
            return
        self._plan(entry, now, self._resume, entry, fence, now)
        self._requeue(entry, now)

    def _paused(self, entry: Entry) -> bool:
        """Whether ``entry`` (or the entry it is a copy of) is paused; if so it leaves the
        queue until it is resumed, and its slot is recorded as skipped."""
        paused = self._controls.paused
        name = entry.name
        if name not in paused and self._fanout.parent_of(name) not in paused:
            return False
        self._parked[name] = entry
        if entry.slot is not None:
            self.watch.skipped(name, entry.slot, "paused", self.now_ms())
        return True

    # Runtime controls -------------------------------------------------------------------------

    def _poll_controls(self, store: Store) -> None:
        """Read what operators changed in the store (every beat, so that a standby that takes
        over knows it) and apply it; as leader, send the triggers waiting."""
        try:
            changed = self._controls.poll(store)
        except Exception as exc:
            self._lease.failed(exc, time.monotonic())
            return
        self._apply(changed, self.now_ms())
        if self._lease.leader and self._controls.triggers_waiting:
            self._send_triggers(store)

    def _apply(self, changed: Changed, now: int) -> None:
        self.broken.update(changed.unreadable)
        if changed.definitions:
            gone = self._catalog.restock(changed.definitions, changed.full)
            gone = [name for name in gone if name not in self.broken]
            if gone and self._lease.leader and self._store is not None:
                # A name added again later is a new entry: nothing of the old one is caught up.
                try:
                    self._store.forget(self.token, gone)
                except Exception as exc:
                    self._lease.failed(exc, time.monotonic())
        for name, floor in changed.resumed.items():
            parked = [
                e for n, e in self._parked.items() if (self._fanout.parent_of(n) or n) == name
            ]
            for entry in parked:
                del self._parked[entry.name]
                if entry.active:
                    start = entry.last_slot if floor is None else self._from(entry, entry.last_slot)
                    self._plan(entry, now, entry.start, start, now)
                    self._requeue(entry, now)
