"""Backfills (docs/design.md §19): the past slots an operator asked for, as the leader sends them.

A backfill request waits in the store's queue beside the triggers (control/backfill.py); the
leader takes it under its lease with them (beat/triggers.py) and hands it here. The store keeps
what a leader took until that leader settles its turn, so a request taken by a leader killed or
cut off mid-turn is handed to the next take, as recovered, and sent from where that turn began:
the slots sent meanwhile are recorded, and skipped. Each turn sends
up to SENT_CHUNK of its slots: they are claimed against the store's record of sent slots, under
the lease, in one call (store/sent.py: a slot that the regular path or an earlier backfill sent
is not claimed), and the claimed ones go out through the Dispatcher's publish, each with its
slot's task id. A slot whose publish surely failed is given back (its record goes) and the
request goes back to the queue for the next turn, where the slots sent meanwhile are recorded
and skipped. What is left of a longer range goes back too, so a large backfill never holds up
the beat's own slots for long.

The entry's overlap policy holds (docs/design.md §12): an unguarded entry (``allow``) gets its
slots in batches; a guarded one gets one slot per turn, holding the entry's run lease for the
slot's task id first, as a guarded claim does. While another run holds the lease, ``buffer_one``
keeps the request waiting until it ends, ``skip`` drops the rest of the range (logged), and
``replace`` revokes the run and sends.

Each claim records its slots as a claimer's (a fresh id each turn). When the answer never comes
(the store timed out, a failover, too few replicas), the leader cannot know whether the claim
ran, and it has sent none of those slots; the request goes back to the queue naming that
claimer, and the next turn asks again as it: the slots that claim recorded are its own again and
are sent, once. The claimer is dropped as soon as an answer is heard, so slots a turn did send
are never taken again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from celery_hashbeat._logs import OVERLAP, SCHEDULER
from celery_hashbeat.beat.storecalls import FAILED
from celery_hashbeat.control.backfill import (
    Request,
    decode_request,
    encode_request,
    slot_range,
    slots_between,
)
from celery_hashbeat.control.stored_text import DefinitionError
from celery_hashbeat.publish.batch import Outcome
from celery_hashbeat.publish.message import slot_iso, slot_task_id
from celery_hashbeat.store.sent import SENT_CHUNK

if TYPE_CHECKING:
    from celery_hashbeat.beat.dispatch import Dispatcher
    from celery_hashbeat.beat.storecalls import StoreCalls
    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.publish.publisher import Publisher

logger = SCHEDULER


class Turn(NamedTuple):
    """One turn of a request: its entry, the slots it sends (``batch``), what is left of the
    request once they are sent (None: nothing), and the turn's claimer."""

    entry: Entry
    request: Request
    batch: list[int]
    following: Request | None
    claimer: str


def split(taken: list[str]) -> tuple[list[str], list[Request]]:
    """The texts taken from the store's queue: the triggers, and the backfill requests (an
    unreadable one is logged and dropped)."""
    triggers: list[str] = []
    requests: list[Request] = []
    for text in taken:
        try:
            request = decode_request(text)
        except DefinitionError as exc:
            logger.error("beat: dropping a backfill request: %s", exc)
            continue
        if request is None:
            triggers.append(text)
        else:
            requests.append(request)
    return triggers, requests


def unqueued(request: Request, why: str) -> None:
    """Log a request (what is left of one) that may not be back in the store's queue. The store
    still holds it as this turn took it, and the next take hands it back (the slots sent since
    are recorded and skipped), so it is not lost; unless this turn's claim went unanswered too:
    the slots that claim recorded count as sent, and the request as taken does not name the
    claimer that could send them, so those may never be sent, and that is logged as an error."""
    if not request.claimer:
        logger.warning(
            "beat: backfill %s of %s may not be back in the store's queue (%s): the store keeps "
            "it as this turn took it, and the leader's next take sends the slots from %s to %s "
            "that are still unsent (no slot is sent twice)",
            request.id,
            request.entry,
            why,
            slot_iso(request.start),
            slot_iso(request.end),
        )
        return
    logger.error(
        "beat: backfill %s of %s may not be back in the store's queue (%s): the slots from %s "
        "to %s may not be sent, and those its unanswered claim recorded count as sent though "
        "none was; ask for the backfill again (no slot is sent twice)",
        request.id,
        request.entry,
        why,
        slot_iso(request.start),
        slot_iso(request.end),
    )


class Backfills:
    """Sends the backfill requests the leader took, a turn's worth each; says which go back to
    the store's queue for the next turn."""

    def __init__(
        self,
        *,
        token: str,
        calls: StoreCalls,
        dispatcher: Dispatcher,
        publisher: Publisher,
        entries: Mapping[str, Entry],
        now_ms: Callable[[], int],
    ) -> None:
        self._token = token
        self._calls = calls
        self._dispatcher = dispatcher
        self._publisher = publisher
        self._entries = entries
        self._now_ms = now_ms
        #: Requests waiting for a run to end (``buffer_one``), logged once each.
        self._waiting: set[str] = set()

    def send(self, requests: list[Request]) -> list[str]:
        """Send a turn of each request; the stored forms of those to take up again."""
        back = []
        for request in requests:
            rest = self._turn(request)
            if rest is not None:
                back.append(encode_request(rest))
        return back

    def _turn(self, request: Request) -> Request | None:
        entry = self._entries.get(request.entry)
        if entry is None or entry.source.chained:
            logger.error(
                "beat: dropping the backfill %s of entry %r: no such entry runs here with fixed "
                "slots",
                request.id,
                request.entry,
            )
            return None
        now = self._now_ms()
        slots = slots_between(entry, request.start, min(request.end, now), SENT_CHUNK)
        batch = slots[:SENT_CHUNK]
        # A range that ends past this beat's clock (the operator's runs ahead of it) is kept
        # until the clock passes its end: its slots still to come are sent then, not dropped.
        ahead = request.end > now
        if not batch:
            if ahead:
                return request
            logger.info("beat: backfill %s of %s is done", request.id, entry.name)
            return None
        # This turn's claimer: the one whose answer was lost, asked again, or a new one. The
        # requests this turn hands back name none unless its claim goes unanswered too.
        claimer, request = request.claimer or uuid.uuid4().hex, request._replace(claimer="")
        more = len(slots) > len(batch) or ahead
        following = request._replace(start=batch[-1] + 1) if more else None
        turn = Turn(entry, request, batch, following, claimer)
        return self._guarded(turn) if entry.run_ttl_ms else self._batch(turn)

    def _claim(self, turn: Turn, slots: list[int]) -> list[int] | None:
        """Claim ``slots`` against the record as the turn's claimer: those claimed, or None when
        the store did not answer or the lease is gone (the request is kept for the next turn)."""
        calls = self._calls
        entry, request = turn.entry, turn.request
        claim = calls.attempt(
            calls.store.claim_slots, self._token, entry.name, slots, claimer=turn.claimer
        )
        if claim is FAILED:
            logger.warning(
                "beat: backfill %s of %s: the store did not confirm the claim of %s; none is "
                "sent now, and the next turn asks again as the same claimer",
                request.id,
                entry.name,
                slot_range(slots),
            )
            return None
        if claim is None:
            return None
        early = [slot for slot in slots if slot < claim.horizon_ms]
        if early:
            logger.warning(
                "beat: backfill %s of %s: not sending %s: the store no longer knows whether "
                "they were sent (before %s)",
                request.id,
                entry.name,
                slot_range(early),
                slot_iso(claim.horizon_ms),
            )
        if claim.sent:
            logger.info(
                "beat: backfill %s of %s: %d slot(s) were sent already, not again",
                request.id,
                entry.name,
                len(claim.sent),
            )
        return list(claim.claimed)

    def _publish(self, turn: Turn, slots: list[int]) -> list[int]:
        """Publish claimed ``slots``; give back those that surely did not go out, and return
        them."""
        entry, request = turn.entry, turn.request
        failed = []
        for _, slot, outcome, error in self._dispatcher.publish_past(entry, slots, request.id):
            if outcome in (Outcome.FAILED, Outcome.UNSENT):
                failed.append(slot)
            elif outcome is not Outcome.SENT:
                logger.error(
                    "beat: backfill %s of %s: slot %s %s (%s); it is not sent again",
                    request.id,
                    entry.name,
                    slot_iso(slot),
                    "cannot be sent" if outcome is Outcome.DROPPED else "may not have gone out",
                    error,
                )
        sent = len(slots) - len(failed)
        if sent:
            logger.info("beat: backfill %s of %s: sent %d slot(s)", request.id, entry.name, sent)
        if failed:
            calls = self._calls
            given = calls.attempt(
                calls.store.unclaim_slots, self._token, entry.name, failed, claimer=turn.claimer
            )
            for slot in [s for s in failed if given is FAILED or s not in given]:
                logger.error(
                    "beat: backfill %s of %s: slot %s cannot be sent: its publish failed and "
                    "its claim could not be given back, so the store counts it as sent and no "
                    "backfill sends it",
                    request.id,
                    entry.name,
                    slot_iso(slot),
                )
        return failed

    def _batch(self, turn: Turn) -> Request | None:
        claimed = self._claim(turn, turn.batch)
        if claimed is None:
            return turn.request._replace(claimer=turn.claimer)
        if claimed and self._publish(turn, claimed):
            return turn.request  # the slots sent are recorded: the next turn skips them
        return turn.following

    def _guarded(self, turn: Turn) -> Request | None:
        """One slot of a guarded entry, under its run lease as its overlap says."""
        entry, request, batch, following, claimer = turn
        claimed = self._claim(turn, batch[:1])
        if claimed is None:
            return request._replace(claimer=claimer)
        rest = request._replace(start=batch[0] + 1) if len(batch) > 1 else following
        if not claimed:
            return rest
        slot = batch[0]
        task_id = slot_task_id(entry.name, slot)
        calls = self._calls
        held = calls.attempt(calls.store.hold_run, entry.name, task_id, entry.run_ttl_ms)
        holders = {} if held is not False else calls.attempt(calls.store.running, [entry.name])
        holder = "" if holders is FAILED else holders.get(entry.name, "")
        if held is not True and (not holder or entry.overlap != "replace"):
            calls.attempt(
                calls.store.unclaim_slots, self._token, entry.name, [slot], claimer=claimer
            )
            if not holder:  # the store did not answer, or the run ended meanwhile
                return request
            return self._overlapped(entry, request, slot, holder)
        self._waiting.discard(request.id)
        if holder:
            OVERLAP.info(
                "beat: backfill %s of %s replaces the run in progress (task %s, overlap "
                "'replace'): revoking it",
                request.id,
                entry.name,
                holder,
            )
            self._publisher.revoke(holder)
        if self._publish(turn, [slot]):
            calls.attempt(calls.store.release_run, entry.name, task_id)
            return request
        return rest

    def _overlapped(self, entry: Entry, request: Request, slot: int, holder: str) -> Request | None:
        """A guarded slot not sent because task ``holder`` runs: ``buffer_one`` waits for it to
        end, ``skip`` drops the rest of the range."""
        if entry.overlap == "buffer_one":
            if request.id not in self._waiting:
                self._waiting.add(request.id)
                OVERLAP.info(
                    "beat: backfill %s of %s waits for the run in progress (task %s, overlap "
                    "'buffer_one') to end",
                    request.id,
                    entry.name,
                    holder,
                )
            return request
        OVERLAP.warning(
            "beat: backfill %s of %s: not sending the slots from %s on: the run in progress "
            "(task %s) holds the run lease and the overlap is 'skip'",
            request.id,
            entry.name,
            slot_iso(slot),
            holder,
        )
        return None
