"""Triggers (docs/design.md §13): the runs an operator asked for now, as the leader sends them.

The leader takes the waiting triggers from the store (under its lease) and sends each once
(``Triggers``). Plain functions over what the store handed over say which entries each trigger
runs (every copy of an entry fanned out to workers, each with an id derived from the trigger's),
and what became of each publish (sent and recorded, to be given back, or lost as at most once
allows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple
from uuid import uuid5

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.beat.compat import BEAT_LOGGER
from celery_hashbeat.beat.storecalls import FAILED
from celery_hashbeat.control.definitions import (
    DefinitionError,
    Trigger,
    decode_trigger,
    encode_trigger,
)
from celery_hashbeat.publish.batch import Outcome, Settled
from celery_hashbeat.publish.message import NAMESPACE, send_slot, slot_iso

if TYPE_CHECKING:
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


def runs_of(
    taken: Iterable[str], entries: Mapping[str, Entry], copies: Mapping[str, set[str]]
) -> list[tuple[Run, int]]:
    """The runs the stored triggers ``taken`` ask for, each with when it was asked (ms); an
    unreadable trigger, or one for an entry that does not run here, is logged and dropped."""
    runs = []
    for text in taken:
        try:
            trigger = decode_trigger(text)
        except DefinitionError as exc:
            logger.error("beat: dropping a trigger: %s", exc)
            continue
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


def settle(settled: Iterable[Settled[Run]], watch: Watch, now_ms: int) -> list[str]:
    """Record the runs that went out and log those lost; the stored triggers to give back
    (their publish surely failed), once each."""
    back: dict[str, str] = {}
    for (entry, trigger, task_id), _, outcome, error in settled:
        if outcome is Outcome.SENT:
            logger.info("beat: %s triggered: sent as task %s", entry.name, task_id)
            watch.triggered(entry.name, task_id, trigger.at, now_ms)
        elif outcome in (Outcome.FAILED, Outcome.UNSENT):
            back[trigger.id] = encode_trigger(trigger)
        else:
            logger.error(
                "beat: the trigger %s of %s %s (%s); it is not sent again",
                task_id,
                entry.name,
                "cannot be sent" if outcome is Outcome.DROPPED else "may not have gone out",
                error,
            )
    return list(back.values())


class Triggers:
    """Sends the triggers waiting in the store, as leader; gives back those that surely did
    not go out, for the next leader's turn."""

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
    ) -> None:
        self._token = token
        self._calls = calls
        self._publisher = publisher
        self._entries = entries
        #: Entry -> the names of its per-worker copies (the fan-out's, kept current by it).
        self._copies = copies
        self._watch = watch
        self._now_ms = now_ms

    def send_waiting(self) -> None:
        calls = self._calls
        taken = calls.attempt(calls.store.take_triggers, self._token)
        if taken is FAILED:
            return
        runs = runs_of(taken, self._entries, self._copies)
        if not runs:
            return
        settled = self._publisher.send_each(runs, self._send)
        back = settle(settled, self._watch, self._now_ms())
        if back:
            calls.attempt(calls.store.give_back_triggers, self._token, back)
        # A beat killed before its next store call (seconds away, perhaps) would lose them.
        outbox = self._watch.outbox
        if outbox:
            calls.attempt(calls.store.record, outbox.drain())

    def _send(self, run: Run, asked: int) -> None:
        entry, _, task_id = run
        BEAT_LOGGER.info("Scheduler: Sending triggered task %s (%s)", entry.name, entry.task)
        publisher = self._publisher
        send_slot(publisher.app, publisher.producer, entry, task_id, slot_iso(asked), trigger=True)
