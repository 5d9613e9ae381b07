"""The Dispatcher: a leader's way from due slots to sent messages.

At a slot the dispatcher takes what is due off the slot queue (``planning``, up to ``BATCH``)
just before the slot's instant (``instants``), claims it with one store call then, lets the run
leases give their verdict, hands the slots it won to the ``Publisher``, which stages their
messages and sends them once the clock reads the instant, and settles each by its outcome: sent
slots move on, those that surely did not go out are given back to the store to be retried
(docs/design.md §5, §10, §15). It owns the slots it claimed and has not sent (``owed``,
handed over to the leader when this beat stops leading: ``handover``), and the slots being
published; nothing else writes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, cast

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat._outage import Outage
from celery_hashbeat.beat.compat import BEAT_LOGGER
from celery_hashbeat.beat.handover import Owed
from celery_hashbeat.beat.instants import Instants
from celery_hashbeat.beat.overlap import WAIT_POLL_MS, Overlaps, Verdict, run_guard
from celery_hashbeat.beat.planning import Planner
from celery_hashbeat.beat.storecalls import FAILED
from celery_hashbeat.publish.batch import Outcome, Settled
from celery_hashbeat.publish.message import slot_iso, slot_task_id
from celery_hashbeat.publish.publisher import PUBLISH_RETRY_MS
from celery_hashbeat.store.errors import ReplicasBehind

if TYPE_CHECKING:
    from celery_hashbeat.beat.lease import Lease
    from celery_hashbeat.beat.parking import Parking
    from celery_hashbeat.beat.storecalls import StoreCalls
    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.observe.watch import Watch
    from celery_hashbeat.publish.publisher import Publisher
    from celery_hashbeat.store.values import Fence

#: The scheduler's logger: operators filter one name for everything a beat says about its slots.
logger = SCHEDULER

#: After a send, the history waits for a claim due within this many ms; else it is written at
#: once (ms).
RIDE_MS = 20


class Dispatcher:
    """Owns the planner (and so the slot queue), the owed slots and the slots being published."""

    def __init__(
        self,
        *,
        token: str,
        entries: Mapping[str, Entry],
        watch: Watch,
        calls: StoreCalls,
        lease: Lease,
        publisher: Publisher,
        parking: Parking,
        now_ms: Callable[[], int],
        clock_s: Callable[[], float],
        retry_ms: Callable[[], int],
        maintain: Callable[[], None],
    ) -> None:
        self._token = token
        self._entries = entries
        self._watch = watch
        self._calls = calls
        self._lease = lease
        self._publisher = publisher
        self._now_ms = now_ms
        #: Renews or takes the lease (and takes over): called when a claim or a publish finds
        #: the lease's call due.
        self._maintain = maintain
        #: The slot queue and each entry's next slot.
        self.planner = planner = Planner(entries, watch, parking, retry_ms)
        self.queue = planner.queue
        self.plan = planner.plan
        self.requeue = planner.requeue
        self.resume = planner.resume
        #: One-shots that ran out of slots, until the store drops them (docs/design.md §21).
        self.done = planner.done
        #: Slots this beat claimed and has not sent, handed over when it is not leading.
        self.owed = Owed(token, calls)
        #: Claims the store made but its replicas did not acknowledge (min_replicas): one line
        #: when they fall behind, one when they hold the claims again.
        self._replicas = Outage(logger, "beat: the store's replicas hold the claims again")
        #: Entry -> (task id, publish time in ms) of the slot now being published.
        self._published: dict[str, tuple[str, int]] = {}
        self.overlaps = Overlaps(self._skipped)
        #: When to wake for a slot, its messages made ahead, and the wait for its instant.
        self.instants = Instants(self.queue, publisher, watch, calls, now_ms, clock_s)

    def reset(self, fences: Mapping[str, Fence], now: int) -> None:
        """As a new leader (which handed over what it owed first): plan every entry from its
        fence, and forget the messages made ahead."""
        self.planner.refill(fences, now)
        self._publisher.ahead.reset()

    def _skipped(self, name: str, slot: int, holder: str) -> None:
        self._watch.skipped(name, slot, "overlap", self._now_ms(), holder)

    # Due -> claim -> verdict -> publish -> settle -----------------------------------------------

    def dispatch_due(self) -> None:
        """Claim and send what is due (or due within ``instants.LEAD_MS``, at its instant),
        unless the broker has taken nothing for longer than a publish may wait: the slots are
        left due, and the leader steps down at its next tick (``beat/standaside.py``) rather
        than wait on that broker again."""
        head = self.queue.head()
        if head is None or self._publisher.stuck:
            return
        instant = self.instants.due(head)
        if instant is not None:
            self.dispatch(instant)

    def dispatch(self, now: int) -> None:
        """Claim every slot due by ``now`` (up to BATCH) in one store call, as soon as they
        are taken off the queue (up to ``instants.LEAD_MS`` before ``now``); publish only what
        was claimed, none of it before the clock reads ``now``; give back, in one more call,
        what could not go out (all of it, if the clock does not reach ``now``)."""
        batch = self.planner.due(now)
        if not batch:
            return
        calls = self._calls
        wanted = {entry.name: (cast(int, entry.slot), entry.fingerprint) for entry in batch}
        guards = {entry.name: run_guard(entry, cast(int, entry.slot)) for entry in batch}
        runs = {name: guard for name, guard in guards.items() if guard is not None}
        history = self._watch.outbox.drain()
        try:
            claimed = calls.call(calls.store.claim, self._token, wanted, runs, history=history)
        except Exception as exc:
            # The claim may have been made and its reply lost: the slots are owed. Leading, this
            # beat claims them again (its own claim is recognised); otherwise it hands them over
            # (docs/design.md §10).
            self.owed.owe((name, slot) for name, (slot, _) in wanted.items())
            self._unconfirmed(batch, exc, now)
            return
        self._replicas.answered()
        mine: list[tuple[Entry, int]] = []
        for entry in batch:
            slot = cast(int, entry.slot)
            verdict = self.overlaps.verdict(entry, slot, claimed)
            if verdict is Verdict.SEND:
                mine.append((entry, slot))
            elif verdict is Verdict.WAIT:
                self.queue.push(entry, now + WAIT_POLL_MS)
            else:
                self.plan(entry, now, entry.advance, slot, now)
                self.requeue(entry, now)
        # Claimed now, so no longer owed: a slot is owed only once it is surely not going out.
        for name in claimed:
            self.owed.paid(name, wanted[name][0])
        if mine:
            # Staged now, sent at the instant; a clock that does not reach it (it stepped back,
            # or stands still) sends nothing, and the slots are due again at once, given back.
            hold = self.instants.hold(now)
            settled = self._publisher.publish(mine, self._still_leading, hold)
            self._settle(settled, now, 0 if hold.missed else PUBLISH_RETRY_MS)
            self._write_history()
        if len(claimed) < len(batch):
            self._lease.due_s = 0.0
            self._maintain()

    def _write_history(self) -> None:
        """Write the records of the slots just sent, unless a claim, which carries them, is due
        within RIDE_MS: a beat killed before its next store call would lose them otherwise, and
        the next renewal may be seconds away (docs/design.md §14)."""
        outbox = self._watch.outbox
        head = self.queue.head()
        if not outbox or (head is not None and head <= self._now_ms() + RIDE_MS):
            return
        calls = self._calls
        calls.attempt(calls.store.record, outbox.drain())

    def _unconfirmed(self, batch: list[Entry], exc: Exception, now: int) -> None:
        """A claim whose reply did not come: retry its slots. Replicas that did not acknowledge
        it leave the lease alone (the store answers: one line until they catch up); any other
        failure makes this beat a standby until the store answers."""
        if isinstance(exc, ReplicasBehind):
            for entry in batch:
                self.queue.push(entry, now + PUBLISH_RETRY_MS)
            self._replicas.failed(exc, "beat: %s; retrying until they do", exc)
            return
        for entry in batch:
            self.requeue(entry, now)
        logger.warning(
            "beat: the claim of %d slot(s) was not confirmed (%s: %s); if the store made it, "
            "this beat sends them if it leads again, or hands them over to the leader",
            len(batch),
            type(exc).__name__,
            exc,
        )
        self._lease.failed(exc, time.monotonic())

    def send_handed(self, taken: list[tuple[str, int]], now: int) -> None:
        """As leader, send the slots other beats (or this one) handed over: each as claimed,
        once; one whose publish surely failed is handed over again (docs/design.md §5)."""
        slots = []
        for name, slot in taken:
            entry = self._entries.get(name)
            if entry is None or not entry.active:
                logger.warning(
                    "beat: not sending %s slot %s, handed over by the beat that claimed it: the "
                    "entry no longer runs",
                    name,
                    slot_iso(slot),
                )
                continue
            slots.append((entry, slot))
        if not slots:
            return
        logger.info(
            "beat: sending %d slot(s) handed over by the beats that claimed them", len(slots)
        )
        again = []
        for entry, slot, outcome, error in self.publish(slots):
            published = self._published.pop(entry.name, None)
            if outcome is Outcome.SENT:
                if published is not None:
                    self._watch.sent(entry.name, slot, *published)
            elif outcome is Outcome.FAILED or outcome is Outcome.UNSENT:
                again.append((entry.name, slot))
            else:
                self._lost(entry, slot, outcome, error)
        self.owed.owe(again)
        self.owed.hand_over()

    def publish(self, slots: list[tuple[Entry, int]]) -> list[Settled[Entry]]:
        """Publish claimed slots, keeping the lease while the broker is waited for."""
        return self._publisher.publish(slots, self._still_leading)

    def publish_past(self, entry: Entry, slots: list[int], ask: str) -> list[Settled[Entry]]:
        """Publish the slots of ``entry`` that the backfill ``ask`` claimed (beat/backfill.py),
        as any claimed slot; they are not the entry's latest sends, so the history records them
        as the backfill's."""
        settled = self.publish([(entry, slot) for slot in slots])
        self._published.pop(entry.name, None)
        now = self._now_ms()
        for _, slot, outcome, _ in settled:
            if outcome is Outcome.SENT:
                self._watch.backfilled(entry.name, slot, slot_task_id(entry.name, slot), now, ask)
        return settled

    def _still_leading(self) -> bool:
        """Asked while a publish waits: keep the lease, and say whether it still holds."""
        if time.monotonic() >= self._lease.due_s:
            self._maintain()
        return self._lease.leader

    def _settle(
        self, settled: list[Settled[Entry]], now: int, retry_ms: int = PUBLISH_RETRY_MS
    ) -> None:
        """Move every entry on by its outcome; give back, in one call, the claims whose slot
        did not go out, to be retried ``retry_ms`` later."""
        back: dict[str, int] = {}
        failure: BaseException | None = None
        for entry, slot, outcome, error in settled:
            if outcome is Outcome.FAILED or outcome is Outcome.UNSENT:
                self._published.pop(entry.name, None)
                if outcome is Outcome.FAILED:
                    self._watch.publish_failed()
                back[entry.name] = slot
                self.queue.push(entry, now + retry_ms)
                failure = failure or error
                continue
            published = self._published.pop(entry.name, None)
            if outcome is Outcome.SENT:
                entry.last_slot = slot
                entry.total_run_count += 1
                if published is not None:
                    self._watch.sent(entry.name, slot, *published)
            else:
                self._lost(entry, slot, outcome, error)
                if outcome is not Outcome.DROPPED:
                    failure = failure or error
            self.plan(entry, now, entry.advance, slot, now)
            self.requeue(entry, now)
        sent = any(s.outcome is Outcome.SENT for s in settled)
        self._publisher.note_outcome(failure, len(back), sent)
        if back:
            self._give_back(back)

    def _lost(self, entry: Entry, slot: int, outcome: Outcome, error: BaseException | None) -> None:
        """Log a slot that is not sent and never will be: dropped (recorded so in the
        history), or perhaps sent."""
        if outcome is Outcome.DROPPED:
            why = f"{type(error).__name__}: {error}"
            self._watch.dropped(entry.name, slot, why, self._now_ms())
            logger.error(
                "beat: %s slot %s can never be sent, so it is dropped (%s: %s); fix the "
                "entry's args, kwargs or options",
                entry.name,
                slot_iso(slot),
                type(error).__name__,
                error,
            )
            return
        self._watch.publish_failed()
        logger.warning(
            "beat: %s slot %s may or may not have reached the broker (%s); it is not "
            "sent again (at most once per slot)",
            entry.name,
            slot_iso(slot),
            "cut short" if error is None else f"{type(error).__name__}: {error}",
        )

    def _give_back(self, back: dict[str, int]) -> None:
        entries = self._entries
        runs = {
            name: slot_task_id(name, slot)
            for name, slot in back.items()
            if entries.get(name) is not None and entries[name].run_ttl_ms
        }
        calls = self._calls
        given = calls.attempt(calls.store.unclaim, self._token, back, runs)
        if given is FAILED:
            given = set()
        self.owed.owe((name, slot) for name, slot in back.items() if name not in given)
        kept = len(back) - len(given)
        if kept:
            logger.warning(
                "beat: %d claimed slot(s) could not be given back (%s); if this beat still "
                "leads it sends them, and otherwise it hands them over to the leader",
                kept,
                ", ".join(sorted(set(back) - given)[:5]),
            )

    # What the publisher calls around each slot ------------------------------------------------

    def announce(self, entry: Entry, task_id: str, when: str) -> None:
        """What comes before a slot's message: revoking the run it replaces, the log line, and
        noting when it went."""
        replaced = self.overlaps.replacing.get(entry.name)
        if replaced is not None:
            logger.info(
                "beat: %s slot %s replaces its run %s: revoking it", entry.name, when, replaced
            )
            self._publisher.revoke(replaced)
        BEAT_LOGGER.info(
            "Scheduler: Sending due task %s (%s) slot %s", entry.name, entry.task, when
        )
        self._published[entry.name] = (task_id, self._now_ms())

    def sent(self, entry: Entry) -> None:
        # Kept until the slot went out: a slot given back and sent again revokes again.
        self.overlaps.replacing.pop(entry.name, None)
