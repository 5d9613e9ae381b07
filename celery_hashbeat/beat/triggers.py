"""Triggers (docs/design.md §13): the runs an operator asked for now, as the leader sends them.
The queue they wait in holds backfill requests too, which go to beat/backfill.py.

A take keeps what it took in the store until the turn is settled (``give_back_triggers``, called
after every take that took something). The store hands back, as recovered, what a leader took
and never settled (killed, or cut off, mid-turn): a backfill request is sent again, since the
record of sent slots keeps each of its slots once; a trigger is not, since nothing records
whether it went out, so it is logged as perhaps lost and dropped (at most once).

The leader takes the waiting triggers from the store (under its lease) and sends each once
(``Triggers``). Plain functions over what the store handed over say which entries each trigger
runs (every copy of an entry fanned out to workers, each with an id derived from the trigger's),
and what became of each publish (sent and recorded, to be given back, or lost as at most once
allows).

A trigger follows its entry's overlap policy (docs/design.md §12): the run of a guarded entry
takes the entry's run lease for its own task id before it is sent, as a guarded slot's claim
does. While another run holds the lease, ``skip`` drops the trigger (logged, and recorded as
skipped), ``buffer_one`` keeps it waiting in the store until the lease is free, and ``replace``
revokes the holder and sends. A trigger the operator forced (``--force``) is sent on top of any
run, and recorded as forced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, NamedTuple
from uuid import uuid5

from celery_hashbeat._logs import OVERLAP, SCHEDULER
from celery_hashbeat.beat.backfill import split, unqueued
from celery_hashbeat.beat.compat import BEAT_LOGGER
from celery_hashbeat.beat.storecalls import FAILED
from celery_hashbeat.control.pause_and_trigger import Trigger, decode_trigger, encode_trigger
from celery_hashbeat.control.stored_text import DefinitionError
from celery_hashbeat.publish.batch import Outcome, Settled
from celery_hashbeat.publish.message import NAMESPACE, send_slot, slot_iso

if TYPE_CHECKING:
    from celery_hashbeat.beat.backfill import Backfills
    from celery_hashbeat.beat.storecalls import StoreCalls
    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.observe.watch import Watch
    from celery_hashbeat.publish.publisher import Publisher

logger = SCHEDULER


class Run(NamedTuple):
    """One run a trigger asks for: the entry (or one copy of it) and the task id it gets."""

    entry: Entry
    trigger: Trigger
    task_id: str


def readable(taken: Iterable[str]) -> Iterator[Trigger]:
    """The stored triggers ``taken``, read; an unreadable one is logged and dropped."""
    for text in taken:
        try:
            yield decode_trigger(text)
        except DefinitionError as exc:
            logger.error("beat: dropping a trigger: %s", exc)


def runs_of(
    taken: Iterable[str], entries: Mapping[str, Entry], copies: Mapping[str, set[str]]
) -> list[tuple[Run, int]]:
    """The runs the stored triggers ``taken`` ask for, each with when it was asked (ms); an
    unreadable trigger, or one for an entry that does not run here, is logged and dropped."""
    runs = []
    for trigger in readable(taken):
        names = sorted(copies.get(trigger.entry, ()))
        targets = [entries[name] for name in names or [trigger.entry] if name in entries]
        if not targets:
            logger.error(
                "beat: dropping the trigger %s of entry %r: no such entry runs here",
                trigger.id,
                trigger.entry,
            )
        for entry in targets:
            task_id = str(uuid5(NAMESPACE, f"{trigger.id}|{entry.name}")) if names else trigger.id
            runs.append((Run(entry, trigger, task_id), trigger.at))
    return runs


def settle(settled: Iterable[Settled[Run]], watch: Watch, now_ms: int) -> list[Run]:
    """Record the runs that went out and log those lost; the runs to give back (their publish
    surely failed)."""
    back: list[Run] = []
    for run, _, outcome, error in settled:
        entry, trigger, task_id = run
        if outcome is Outcome.SENT:
            forced = " (forced past its overlap guard)" if trigger.force else ""
            logger.info("beat: %s triggered: sent as task %s%s", entry.name, task_id, forced)
            watch.triggered(entry.name, task_id, trigger.at, now_ms, forced=trigger.force)
        elif outcome in (Outcome.FAILED, Outcome.UNSENT):
            back.append(run)
        else:
            logger.error(
                "beat: the trigger %s of %s %s (%s); it is not sent again",
                task_id,
                entry.name,
                "cannot be sent" if outcome is Outcome.DROPPED else "may not have gone out",
                error,
            )
    return back


def drop_abandoned(triggers: Iterable[str]) -> None:
    """Log the triggers a leader took and never settled (killed or cut off mid-turn), which
    the store hands back as recovered: nothing records whether that leader sent them, so none
    is sent again (at most once), and each is named as perhaps lost."""
    for trigger in readable(triggers):
        logger.error(
            "beat: the trigger %s of %s may not have gone out: a leader took it and never "
            "settled its turn (killed or cut off), and it is not sent again; trigger the entry "
            "again if it did not run",
            trigger.id,
            trigger.entry,
        )


def given_back(runs: Iterable[Run]) -> list[str]:
    """The stored triggers that ask again for ``runs``: a trigger whose one run goes back as it
    was, else one trigger per run, for that copy and its task id alone, so that the runs of
    the same trigger already sent are not sent again."""
    back = []
    for entry, trigger, task_id in runs:
        if task_id == trigger.id:
            back.append(encode_trigger(trigger))
        else:
            back.append(encode_trigger(Trigger(entry.name, task_id, trigger.at, trigger.force)))
    return list(dict.fromkeys(back))


class Triggers:
    """Sends the triggers waiting in the store, as leader, each as its entry's overlap policy
    says; gives back those that surely did not go out, or wait for a run to end, for the next
    turn."""

    def __init__(
        self,
        *,
        token: str,
        calls: StoreCalls,
        publisher: Publisher,
        entries: Mapping[str, Entry],
        copies: Mapping[str, set[str]],
        watch: Watch,
        now_ms: Callable[[], int],
        backfills: Backfills,
    ) -> None:
        self._token = token
        self._backfills = backfills
        self._calls = calls
        self._publisher = publisher
        self._entries = entries
        #: Entry -> the names of its per-worker copies (the fan-out's, kept current by it).
        self._copies = copies
        self._watch = watch
        self._now_ms = now_ms
        #: Task ids of triggers waiting for a run to end (``buffer_one``), logged once each.
        self._waiting: set[str] = set()

    def send_waiting(self) -> None:
        calls = self._calls
        taken = calls.attempt(calls.store.take_triggers, self._token)
        if taken is FAILED or not taken:
            return
        abandoned, requests = split(taken[: taken.recovered])
        triggers, fresh = split(taken[taken.recovered :])
        drop_abandoned(abandoned)
        # Backfill requests wait in the same queue, and one a leader took and never settled is
        # sent again (the record of sent slots keeps each slot once): what is left of them goes
        # back with the rest.
        requests += fresh
        later = self._backfills.send(requests) if requests else []
        runs = runs_of(triggers, self._entries, self._copies)
        if not runs:
            self._give_back(later)
            return
        sendable, waiting = self._guarded(runs)
        settled = self._publisher.send_each(sendable, self._send) if sendable else []
        failed = settle(settled, self._watch, self._now_ms())
        for entry, trigger, task_id in failed:
            if entry.run_ttl_ms and not trigger.force:  # the lease taken for a run not sent
                calls.attempt(calls.store.release_run, entry.name, task_id)
        self._give_back(given_back([*waiting, *failed]) + later)
        # A beat killed before its next store call (seconds away, perhaps) would lose them.
        outbox = self._watch.outbox
        if outbox:
            calls.attempt(calls.store.record, outbox.drain())

    def _give_back(self, back: list[str]) -> None:
        """Settle the turn: put ``back`` in the store's queue for the next turn and clear what
        this turn took (every turn that took something settles, or the next take recovers it
        all). What may not be back (the store did not answer, or this beat no longer leads) is
        logged by name: a trigger as lost, a backfill request as kept taken in the store, to be
        taken up again by the next take, unless its claim went unanswered too."""
        calls = self._calls
        given = calls.attempt(calls.store.give_back_triggers, self._token, back)
        if given is True:
            return
        why = "the store did not answer" if given is FAILED else "this beat no longer leads"
        triggers, requests = split(back)
        for trigger in map(decode_trigger, triggers):
            logger.error(
                "beat: the trigger %s of %s may not have gone out: it may not be back in the "
                "store's queue (%s); trigger the entry again if it did not run",
                trigger.id,
                trigger.entry,
                why,
            )
        for request in requests:
            unqueued(request, why)

    def _guarded(self, runs: list[tuple[Run, int]]) -> tuple[list[tuple[Run, int]], list[Run]]:
        """The runs to send now, each guarded one holding its entry's run lease, and the runs
        that wait (``buffer_one``, or a store that did not answer); a run that ``skip`` drops
        is logged and recorded here."""
        calls = self._calls
        sendable, waiting = [], []
        for run, asked in runs:
            entry, trigger, task_id = run
            if not entry.run_ttl_ms or trigger.force:
                sendable.append((run, asked))
                continue
            held = calls.attempt(calls.store.hold_run, entry.name, task_id, entry.run_ttl_ms)
            holders = {} if held is not False else calls.attempt(calls.store.running, [entry.name])
            holder = "" if holders is FAILED else holders.get(entry.name, "")
            if held is True:
                self._waiting.discard(task_id)
                sendable.append((run, asked))
            elif not holder:  # the store did not answer, or the lease lapsed meanwhile
                waiting.append(run)
            elif entry.overlap == "replace":
                OVERLAP.info(
                    "beat: the trigger %s of %s replaces the run in progress (task %s, "
                    "overlap 'replace'): revoking it",
                    task_id,
                    entry.name,
                    holder,
                )
                self._publisher.revoke(holder)
                sendable.append((run, asked))
            elif entry.overlap == "buffer_one":
                if task_id not in self._waiting:
                    self._waiting.add(task_id)
                    OVERLAP.info(
                        "beat: the trigger %s of %s waits for the run in progress (task %s, "
                        "overlap 'buffer_one') to end",
                        task_id,
                        entry.name,
                        holder,
                    )
                waiting.append(run)
            else:
                OVERLAP.warning(
                    "beat: the trigger %s of %s is not sent: the run in progress (task %s) "
                    "holds its run lease and its overlap is 'skip'; `hashbeat trigger --force` "
                    "runs it anyway",
                    task_id,
                    entry.name,
                    holder,
                )
                self._watch.trigger_skipped(entry.name, task_id, holder, self._now_ms())
        return sendable, waiting

    def _send(self, run: Run, asked: int) -> None:
        entry, _, task_id = run
        BEAT_LOGGER.info("Scheduler: Sending triggered task %s (%s)", entry.name, entry.task)
        publisher = self._publisher
        send_slot(publisher.app, publisher.producer, entry, task_id, slot_iso(asked), trigger=True)
