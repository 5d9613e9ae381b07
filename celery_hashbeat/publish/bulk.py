"""Publishing a batch in chunks through a ``Sink``, each chunk in as few round trips as the
transport allows, with the exact account of ``batch`` per message.

A batch may start before its slots are claimed (``gate``): it then stages the messages of its
first chunk without announcing them (no log line, no run revoked, nothing written), waits at the
gate for the slots the claim won, drops the others' messages unsent, announces the rest and sends
them. Slots the gate keeps out are not part of the batch's account: the leader settles them by
its claim's verdict, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypeVar

from celery_hashbeat.publish.batch import (
    TRANSIENT_ERRORS,
    Batch,
    MayHaveGone,
    Outcome,
    Settled,
    Undeliverable,
    never_reached,
)
from celery_hashbeat.publish.gate import Gate

if TYPE_CHECKING:
    from celery_hashbeat._background import Job
    from celery_hashbeat.entries.entry import Entry

E = TypeVar("E")
E_contra = TypeVar("E_contra", contravariant=True)

#: While the claim is in flight, the staging lets go of Python's interpreter lock after every
#: this many messages: the claim's own thread needs it to write the claim and to read its answer,
#: and would otherwise wait for the staging to end (measured: the claim then answered about 1 ms
#: later, and the gate cost more than it saved).
YIELD_EVERY = 8


class Sink(Protocol[E_contra]):
    """Where a ``Bulk`` batch puts its messages (``sink.BulkSink``)."""

    @property
    def immediate(self) -> bool:
        """Whether ``stage`` sends at once (AMQP) rather than buffering until ``flush``."""

    def direct(self, entry: E_contra) -> bool:
        """Whether this entry's slots must go one by one through ``send`` instead."""

    @property
    def speculates(self) -> bool:
        """Whether messages may be staged before their slots are claimed: buffered without a
        write until ``flush`` (Redis), so that ``admit`` can still drop them."""

    def stage(self, entry: E_contra, slot: int, *, unclaimed: bool = False) -> None:
        """Build the slot's message and buffer it (or send it, if immediate); ``unclaimed``:
        its slot is not claimed yet, so it is not announced until ``admit`` says it may go."""

    def admit(self, entries: Sequence[E_contra], allowed: Sequence[bool]) -> None:
        """The claim answered for the buffered messages (of ``entries``, in order): drop those
        not ``allowed``, unsent, and announce the others."""

    def flush(self) -> list[BaseException | None]:
        """Send what is buffered, in as few round trips as the transport allows; per message,
        None if the broker took it, else why not (a ``MayHaveGone`` if it may have, an
        ``Undeliverable`` if it never will). Raises if the round trip failed as a whole."""

    def discard(self) -> None:
        """Drop what is buffered, unsent."""

    def sent(self, entry: E_contra, slot: int) -> None:
        """The slot's message reached the broker (signals, hooks)."""

    def unsent(self, entry: E_contra, slot: int) -> None:
        """The slot's buffered message did not go out."""


class Bulk(Batch[E]):
    """A batch whose messages go out together through a ``Sink``: buffered up to ``chunk`` at a
    time and sent in one go, so a slot is only as late as its chunk, not as the whole queue.

    The account stays exact per message: a chunk that was sent in full is ``SENT``; a chunk whose
    round trip failed is ``FAILED`` if the broker surely took none of it (refused), else
    ``UNKNOWN``; a message the broker refused for good (``Undeliverable``) is ``DROPPED`` and the
    rest go on; a chunk never sent (cut short, or a message that could not be built because the
    broker is unreachable) is given back as ``UNSENT``. ``in_flight_for`` counts from the
    connect on, so a broker that hangs anywhere (connect, channel set-up, declare, write) is
    left behind. Entries the sink cannot build go through
    ``send`` one by one, as in ``Batch``, after the chunk before them went out.
    """

    def __init__(
        self,
        slots: Sequence[tuple[E, int]],
        sink: Sink[E],
        send: Callable[[E, int], object],
        transient: tuple[type[BaseException], ...] = TRANSIENT_ERRORS,
        connect: Callable[[], object] = lambda: None,
        chunk: int = 500,
        gate: Gate | None = None,
    ) -> None:
        super().__init__(slots, send, transient, connect)
        self._sink = sink
        self._chunk = chunk
        #: While the slots' claim is in flight: where to learn which of them may go.
        self._gate = gate
        #: The places of the slots the gate kept out (not part of the account).
        self._excluded: frozenset[int] = frozenset()

    def run(self) -> None:
        # The clock runs from before the connect to the last answer: a connect, a channel's
        # set-up or a declare that hangs is a broker that does not answer, like a publish.
        with self._lock:
            self._in_flight_since = time.monotonic()
        try:
            self._run()
        finally:
            with self._lock:
                self._in_flight_since = None

    def _end(self, index: int, outcome: Outcome, error: BaseException | None) -> None:
        """As ``Batch._end``, but the clock goes on: the next wait on the broker may come
        before the next message starts (a channel, a declare)."""
        super()._end(index, outcome, error)
        with self._lock:
            self._in_flight_since = time.monotonic()

    def _run(self) -> None:
        sink = self._sink
        try:
            self._connect()
        except Exception as exc:  # no message has left yet
            self._pass_gate([])
            first = next((i for i in range(len(self.slots)) if i not in self._excluded), None)
            if first is not None:
                self._end(first, Outcome.FAILED, exc)
            return
        pending: list[int] = []
        immediate = sink.immediate  # the sink's output, fixed once it connected
        if not sink.speculates:
            self._pass_gate(pending)
        for index, (entry, slot) in enumerate(self.slots):
            if self._cancelled:
                break
            if index in self._excluded:
                continue
            if sink.direct(entry):
                self._pass_gate(pending)
                if index in self._excluded:
                    continue
                if not self._flush(pending) or not self._one(index, entry, slot):
                    return
                continue
            if immediate:
                self._begin(index)
            try:
                self._stage(index, entry, slot)
            except Exception as exc:
                self._pass_gate(pending)
                outcome = self._classify(exc)
                if not immediate and outcome is not Outcome.DROPPED:
                    outcome = Outcome.FAILED  # only built, never sent: nothing left
                if index not in self._excluded:
                    self._end(index, outcome, exc)
                if outcome is Outcome.DROPPED:
                    continue
                self._abandon(pending)
                return
            if immediate:
                self._end(index, Outcome.SENT, None)
                sink.sent(entry, slot)
                continue
            pending.append(index)
            if len(pending) >= self._chunk:
                self._pass_gate(pending)
                if not self._flush(pending):
                    return
        self._pass_gate(pending)
        if self._cancelled:
            self._abandon(pending)
        else:
            self._flush(pending)

    def _stage(self, index: int, entry: E, slot: int) -> None:
        """Stage the slot's message: unannounced while the claim is in flight, letting go of
        the interpreter lock every ``YIELD_EVERY`` messages meanwhile."""
        unclaimed = self._gate is not None
        self._sink.stage(entry, slot, unclaimed=unclaimed)
        if unclaimed and index % YIELD_EVERY == YIELD_EVERY - 1:
            time.sleep(0)  # the claim's thread, if waiting, takes the lock

    def _pass_gate(self, pending: list[int]) -> None:
        """Wait for the claim's answer (once, if the batch has a gate): the slots it kept out
        are dropped from the buffer and from the account, the buffered ones it let through are
        announced. The wait is not the broker's: the clock of a hung broker stops meanwhile."""
        gate, self._gate = self._gate, None
        if gate is None:
            return
        with self._lock:
            self._in_flight_since = None
        allowed = gate.wait()
        with self._lock:
            self._in_flight_since = time.monotonic()
        self._excluded = frozenset(range(len(self.slots))) - allowed
        if pending:
            self._sink.admit(
                [self.slots[index][0] for index in pending], [i in allowed for i in pending]
            )
            pending[:] = [index for index in pending if index in allowed]

    def settle(self) -> list[Settled[E]]:
        """As ``Batch.settle``, for the slots the gate let through."""
        excluded = self._excluded
        settled = super().settle()
        if not excluded:
            return settled
        return [each for index, each in enumerate(settled) if index not in excluded]

    def _abandon(self, pending: list[int]) -> None:
        """Stop the batch: the buffered messages were never sent, and are given back."""
        self._sink.discard()
        pending.clear()

    def _begin(self, index: int) -> None:
        with self._lock:
            self._in_flight_since = time.monotonic()
            self._started = index + 1

    def _one(self, index: int, entry: E, slot: int) -> bool:
        """Send one slot as ``Batch`` does; whether the batch may go on."""
        self._begin(index)
        try:
            self._send(entry, slot)
        except Exception as exc:
            outcome = self._classify(exc)
            self._end(index, outcome, exc)
            return outcome is Outcome.DROPPED
        self._end(index, Outcome.SENT, None)
        return True

    def _flush(self, pending: list[int]) -> bool:
        """Send the buffered chunk; whether the batch may go on. Empties ``pending``."""
        if not pending:
            return True
        with self._lock:
            if self._cancelled:
                return False
            self._in_flight_since = time.monotonic()
            self._started = pending[-1] + 1
        try:
            errors = self._sink.flush()
        except Exception as exc:
            # Whatever broke, part of the chunk may have gone out, unless the broker refused.
            outcome = Outcome.FAILED if never_reached(exc) else Outcome.UNKNOWN
            for index in pending:
                self._end(index, outcome, exc)
            pending.clear()
            return False
        if not any(errors):  # the usual chunk: every message taken, settled under one lock
            with self._lock:
                for index in pending:
                    self.outcomes[index] = Outcome.SENT
                self._in_flight_since = time.monotonic()
            sent = self._sink.sent
            for index in pending:
                sent(*self.slots[index])
            pending.clear()
            return True
        carry_on = True
        for index, error in zip(pending, errors, strict=True):
            if error is None:
                self._end(index, Outcome.SENT, None)
                self._sink.sent(*self.slots[index])
                continue
            if isinstance(error, Undeliverable):  # this message's fault alone: the rest go on
                self._end(index, Outcome.DROPPED, error)
                self._sink.unsent(*self.slots[index])
                continue
            # The broker answered this message with an error: it did not take it, unless the
            # error says it may have (part of a fanout).
            unsure = isinstance(error, MayHaveGone)
            self._end(index, Outcome.UNKNOWN if unsure else Outcome.FAILED, error)
            self._sink.unsent(*self.slots[index])
            carry_on = False
        pending.clear()
        return carry_on


class Staged(NamedTuple):
    """A publish started while its slots' claim is in flight (``Publisher.stage``)."""

    batch: Bulk[Entry]
    gate: Gate
    job: Job

    def admit(self, claimed: list[tuple[Entry, int]]) -> None:
        """Let the claimed ones of the staged slots go."""
        won = {(entry.name, slot) for entry, slot in claimed}
        self.gate.open(
            index
            for index, (entry, slot) in enumerate(self.batch.slots)
            if (entry.name, slot) in won
        )

    def drop(self) -> None:
        """Let none go, unless ``admit`` came first (the claim failed, or the beat got no
        further): the staged messages are dropped, unsent, and the broker's thread goes on."""
        self.gate.close()
