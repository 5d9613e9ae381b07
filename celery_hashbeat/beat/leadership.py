"""Leadership: the lease, what a beat does as it becomes leader, and the store's changes.

A new leader reads every entry's fence and plans each entry from it (docs/design.md §5),
anchoring what the store has not seen; as leader it keeps the worker census and the balanced
assignment in the store (§11, §16) and sends the operators' triggers. Every beat applies what
operators changed (§13): entries added, updated or removed, pauses and resumes, each planned from
where its slots now count (its floor), so nothing from before a change is ever caught up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.beat.storecalls import FAILED
from celery_hashbeat.control import polling

if TYPE_CHECKING:
    from celery_hashbeat.beat.census import WorkerCensus
    from celery_hashbeat.beat.dispatch import Dispatcher
    from celery_hashbeat.beat.lease import Lease
    from celery_hashbeat.beat.parking import Parking
    from celery_hashbeat.beat.storecalls import StoreCalls
    from celery_hashbeat.beat.triggers import Triggers
    from celery_hashbeat.control.polling import Changed, ControlState
    from celery_hashbeat.entries.catalog import Catalog
    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.observe.watch import Watch
    from celery_hashbeat.store.values import Fence

#: The scheduler's logger: operators filter one name for everything a beat says about its slots.
logger = SCHEDULER

#: A poll that would fall due this close to the next slot (ms), before or after it, is made
#: ahead of it instead.
POLL_NEAR_MS = 20
#: ... when there is at least this much time before that slot (ms): a poll is a store round
#: trip, and a poll that would delay the slot is better made after it.
POLL_ROOM_MS = 10


def read_run_counts(entries: Mapping[str, Entry], fences: Mapping[str, Fence]) -> None:
    """Give entries the ``last_run_at`` and ``total_run_count`` the store knows, so that both
    survive restarts and failovers (as Celery's own scheduler keeps them in its file): the last
    slot claimed (or, before any, the anchor the slots count from) and the run count kept beside
    the fence."""
    for name, fence in fences.items():
        entry = entries.get(name)
        if entry is not None:
            entry.last_slot = fence.slot
            entry.total_run_count = fence.runs


class Leadership:
    """Owns the lease, the operators' controls, the census and the shared balance."""

    def __init__(
        self,
        *,
        token: str,
        lease: Lease,
        calls: StoreCalls,
        open_store: Callable[[], None],
        catalog: Catalog,
        controls: ControlState,
        parking: Parking,
        census: WorkerCensus,
        dispatcher: Dispatcher,
        triggers: Triggers,
        watch: Watch,
        now_ms: Callable[[], int],
    ) -> None:
        self._token = token
        self.lease = lease
        self._calls = calls
        self._open_store = open_store
        self._catalog = catalog
        self.controls = controls
        self._parking = parking
        self._census = census
        self._dispatcher = dispatcher
        self._triggers = triggers
        self._watch = watch
        self._now_ms = now_ms
        #: The balancer's version last kept in the store by this beat as leader.
        self._balance_shared = -1
        #: Whether a standby has yet to read last_run_at and total_run_count from the store.
        self._run_counts_unread = True

    @property
    def leader(self) -> bool:
        return self.lease.leader

    def wake_s(self) -> float:
        """When (monotonic seconds) the lease, or the controls' poll, next needs a call."""
        lease = self.lease
        return min(lease.due_s, self.controls.due_s) if lease.answering else lease.due_s

    # The lease --------------------------------------------------------------------------------

    def maintain(self) -> None:
        """Renew or take the lease (opening the store first if it is not open); take over on
        becoming leader; as a standby, hand over what this beat owes (docs/design.md §5) and
        read the run counts once."""
        self._watch.entries(self._catalog.count())
        calls = self._calls
        if not calls.opened:
            self._open_store()
            if not calls.opened:
                return
        lease = self.lease
        if lease.maintain(calls, time.monotonic()):
            self._take_over()
            return
        if lease.leader or not lease.answering:
            return
        self._dispatcher.owed.hand_over()
        if self._run_counts_unread:
            try:
                fences = calls.call(calls.store.fences)
            except Exception:
                return  # tried again at the next lease call
            read_run_counts(self._catalog.entries, fences)
            self._run_counts_unread = False

    def _take_over(self) -> None:
        """As the new leader, read every entry's fence and catch up from it (docs/design.md §5).

        A chained entry (an interval) the store has never seen, or any entry whose schedule
        changed, is anchored at now first: its slots count from there whichever beat leads
        next, so an interval keeps its phase across leader changes and a changed schedule is
        never caught up into the past.
        """
        now = self._now_ms()
        calls, store, token = self._calls, self._calls.store, self._token
        catalog = self._catalog
        entries, fanout = catalog.entries, catalog.fanout
        self._balance_shared = -1  # a new leader's assignment wins (docs/design.md §16)
        try:
            # What this beat owes goes to the pool first: planned from the fences below, the
            # entries move past those slots, and the pool sends them (docs/design.md §5).
            self._dispatcher.owed.hand_over(strict=True)
            if not self.controls.known:
                self.controls.poll(calls.call(store.changes, self.controls.version), self.apply)
            if fanout.every_worker:
                roster = calls.call(store.roster)
                if roster is not None and roster.nodes != fanout.nodes:
                    self._regroup(roster.nodes)
                self._census.due_now()
            fences = calls.call(store.fences)
            read_run_counts(entries, fences)
            gone = [name for name in fences if name not in entries and name not in catalog.broken]
            if gone:
                calls.call(store.forget, token, gone)
            fresh = {
                name: (now, entry.fingerprint)
                for name, entry in entries.items()
                if entry.needs_anchor(fences.get(name))
            }
            if fresh:
                fences.update(calls.call(store.anchor, token, fresh))
            catalog.refuse_missed_once(catalog.passed_once, fences, now)
        except Exception as exc:
            self.lease.failed(exc, time.monotonic())
            return
        self._dispatcher.reset(fences, now)
        self._parking.clear()
        self.controls.due_s = 0.0  # the next tick sends the triggers that waited for a leader
        logger.debug("beat: leading %d entries (%d forgotten)", len(entries), len(gone))

    def added(self, entry: Entry, now: int) -> None:
        """A new or changed entry: as leader, plan it from its anchor in the store
        (docs/design.md §10)."""
        if not self.lease.leader:
            return
        calls = self._calls
        instant = self._parking.floor_of(entry, None) or now
        anchors = {entry.name: (instant, entry.fingerprint)}
        anchored = calls.attempt(calls.store.anchor, self._token, anchors)
        if anchored is FAILED:
            return
        self._catalog.refuse_missed_once((entry.name,), anchored, now)
        if not entry.active:
            return
        dispatcher = self._dispatcher
        dispatcher.plan(entry, now, dispatcher.resume, entry, anchored.get(entry.name), now)
        dispatcher.requeue(entry, now)

    def _forget(self, names: list[str]) -> None:
        """As leader, drop the fences of entries that no longer run: a name added again later
        is a new entry, and nothing of the old one is caught up."""
        if names and self.lease.leader and self._calls.opened:
            calls = self._calls
            calls.attempt(calls.store.forget, self._token, names)

    # Workers and the balance ----------------------------------------------------------------

    def share_balance(self) -> None:
        """As leader, keep the balanced assignment in the store, where every beat and the
        ``hashbeat`` commands read the values in use."""
        balancer = self._catalog.balancer
        if self._balance_shared == balancer.version:
            return
        version = balancer.version
        calls = self._calls
        shared = calls.attempt(calls.store.share, self._token, "balance", balancer.stored_form())
        if shared is not FAILED and shared:
            self._balance_shared = version

    def take_census(self) -> None:
        """As leader, ask which workers are alive (at most once per refresh, off this thread);
        keep a changed answer in the store and fan the ``"*"`` entries out to it."""
        if not self._catalog.fanout.every_worker:
            return
        nodes = self._census.poll()
        if nodes is None or nodes == self._catalog.fanout.nodes:
            return
        calls = self._calls
        kept = calls.attempt(calls.store.set_roster, self._token, nodes, self._now_ms())
        if kept is FAILED or not kept:
            return
        self._regroup(nodes)

    def _regroup(self, nodes: tuple[str, ...]) -> None:
        """Fan the ``"*"`` entries out to ``nodes``: a worker that joined starts at its next
        slot, one that left gets no more runs (and its fences go, so a return starts afresh)."""
        self._forget(sorted(self._catalog.regroup(nodes)))

    # Runtime controls -------------------------------------------------------------------------

    def poll_controls(self) -> None:
        """Read what operators changed in the store (every beat, so that a standby that takes
        over knows it) and apply it; as leader, send the triggers waiting."""
        if not (self._calls.opened and self.lease.answering):
            return
        if time.monotonic() < self.controls.due_s:
            return
        calls = self._calls
        changes = calls.attempt(calls.store.changes, self.controls.version)
        if changes is FAILED:
            return
        self.controls.poll(changes, self.apply)
        if self.lease.leader and self.controls.handed_waiting:
            taken = calls.attempt(calls.store.take_handed, self._token)
            if taken is not FAILED:
                self._dispatcher.send_handed(taken, self._now_ms())
        if self.lease.leader and self.controls.triggers_waiting:
            self._triggers.send_waiting()
        if self.lease.leader:
            self._dispatcher.done.prune(self._now_ms(), self._catalog.stored, calls)

    def poll_ahead_of(self, head_ms: int, now_ms: int) -> None:
        """Poll now, while nothing is due, when the poll would otherwise fall due with the slot
        at ``head_ms`` (or just before or after it): it would go first at that tick and make
        every slot of the instant a store round trip late, and, polled every ``POLL_S``, it
        would stay on the whole seconds where most slots fall. Polled early, it is as fresh."""
        controls = self.controls
        due_in_ms = (controls.due_s - time.monotonic()) * 1000
        room_ms = head_ms - now_ms
        near = abs(due_in_ms - room_ms) <= POLL_NEAR_MS
        # Only for a slot nearer than a poll's period: the poll made now is then next due after
        # the slot, never again near it (a slot a period away would keep every tick polling).
        within = room_ms + POLL_NEAR_MS < polling.POLL_S * 1000
        if near and within and due_in_ms > 0 and room_ms >= POLL_ROOM_MS:
            controls.due_s = 0.0
            self.poll_controls()

    def apply(self, changed: Changed) -> None:
        """Apply operators' changes: definitions to the catalog, resumes to parked entries."""
        now = self._now_ms()
        catalog = self._catalog
        catalog.broken.update(changed.unreadable)
        if changed.definitions:
            gone = catalog.restock(changed.definitions, changed.full)
            self._forget([name for name in gone if name not in catalog.broken])
        dispatcher = self._dispatcher
        for name, floor in changed.resumed.items():
            for entry in self._parking.release(name):
                if entry.active:
                    start = entry.last_slot
                    if floor is not None:
                        start = self._parking.floor_of(entry, entry.last_slot)
                    dispatcher.plan(entry, now, entry.start, start, now)
                    dispatcher.requeue(entry, now)
