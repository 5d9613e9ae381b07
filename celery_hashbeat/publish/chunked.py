"""Publishing one tick's claimed slots in chunks (``Bulk``), through a ``Sink`` that sends each
chunk in one go, with the same exact account per slot as one at a time (``batch``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from celery_hashbeat.publish.batch import (
    TRANSIENT_ERRORS,
    Batch,
    MayHaveGone,
    Outcome,
    Undeliverable,
    never_reached,
)

E = TypeVar("E")
E_contra = TypeVar("E_contra", contravariant=True)


class Sink(Protocol[E_contra]):
    """Where a ``Bulk`` batch puts its messages (``sink.BulkSink``)."""

    @property
    def immediate(self) -> bool:
        """Whether ``stage`` sends at once (AMQP) rather than buffering until ``send``."""

    def direct(self, entry: E_contra) -> bool:
        """Whether this entry's slots must go one by one through ``send`` instead."""

    def stage(self, entry: E_contra, slot: int) -> None:
        """Build the slot's message and buffer it (or send it, if immediate)."""

    @property
    def answers_later(self) -> bool:
        """Whether the broker's answers to a chunk sent are read later (AMQP), so that the next
        chunk is made meanwhile, rather than as it is sent (a Redis pipeline)."""

    def send(self) -> None:
        """Start sending what is buffered, in as few writes as the transport allows. Raises if
        the write failed."""

    def answers(self) -> list[BaseException | None]:
        """The broker's answer to each message of the chunk last sent (waiting for it): None if
        the broker took it, else why not (a ``MayHaveGone`` if it may have, an
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

    Where the broker's answers come later (``Sink.answers_later``), the next chunk is built while
    the broker handles one, and it is sent only once the one before it has its answers: a chunk
    is in the air at most, and a cut, a hold, a failed or refused chunk stops the next one
    before it leaves, as if built after.

    The account stays exact per message: a chunk that was sent in full is ``SENT``; a chunk whose
    round trip failed is ``FAILED`` if the broker surely took none of it (refused), else
    ``UNKNOWN``; a message the broker refused for good (``Undeliverable``) is ``DROPPED`` and the
    rest go on; a chunk never sent (cut short, or a message that could not be built because the
    broker is unreachable) is given back as ``UNSENT``. ``in_flight_for`` counts from the
    connect on, so a broker that hangs anywhere (connect, channel set-up, declare, write) is
    left behind. Entries the sink cannot build go through ``send`` one by one, as in ``Batch``,
    after the chunk before them has its answers.
    """

    def __init__(
        self,
        slots: Sequence[tuple[E, int]],
        sink: Sink[E],
        send: Callable[[E, int], object],
        transient: tuple[type[BaseException], ...] = TRANSIENT_ERRORS,
        connect: Callable[[], object] = lambda: None,
        chunk: int = 500,
        hold: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(slots, send, transient, connect, hold)
        self._sink = sink
        self._chunk = chunk
        #: The slots of the chunk sent whose answers are not read yet.
        self._air: list[int] = []

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
            if self.slots:
                self._end(0, Outcome.FAILED, exc)
            return
        pending: list[int] = []
        immediate = sink.immediate  # the sink's output, fixed once it connected
        for index, (entry, slot) in enumerate(self.slots):
            if self._cancelled:
                break
            if sink.direct(entry):
                if not (self._flush(pending) and self._land() and self._one(index, entry, slot)):
                    return
                continue
            if immediate:
                if not self._held():
                    break
                self._begin(index)
            try:
                sink.stage(entry, slot)
            except Exception as exc:
                outcome = self._classify(exc)
                if not immediate and outcome is not Outcome.DROPPED:
                    outcome = Outcome.FAILED  # only built, never sent: nothing left
                self._end(index, outcome, exc)
                if outcome is Outcome.DROPPED:
                    continue
                self._land()  # the chunk before it still gets its account
                sink.discard()
                return
            if immediate:
                self._end(index, Outcome.SENT, None)
                sink.sent(entry, slot)
                continue
            pending.append(index)
            if len(pending) >= self._chunk and not self._flush(pending):
                return
        if self._cancelled:
            self._land()
            sink.discard()  # the buffered ones were never sent: given back
        elif self._flush(pending):
            self._land()

    def _begin(self, index: int) -> None:
        with self._lock:
            self._in_flight_since = time.monotonic()
            self._started = index + 1

    def _one(self, index: int, entry: E, slot: int) -> bool:
        """Send one slot as ``Batch`` does; whether the batch may go on."""
        if not self._held():
            return False
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
        """Send the buffered chunk once the chunk in the air has its answers; whether the batch
        may go on. Empties ``pending``."""
        if not pending:
            return True
        landed = self._land()
        self._held()  # an instant that does not come cancels the batch
        with self._lock:
            go_on = landed and not self._cancelled
            if go_on:
                self._in_flight_since = time.monotonic()
                self._started = pending[-1] + 1
        if not go_on:  # never sent: given back, and not left for the next batch
            self._sink.discard()
            pending.clear()
            return False
        try:
            self._sink.send()
        except Exception as exc:
            self._failed(pending, exc)
            return False
        self._air = list(pending)
        pending.clear()
        return self._sink.answers_later or self._land()

    def _failed(self, chunk: list[int], exc: BaseException) -> None:
        """Settle a chunk whose round trip failed: whatever broke, part of it may have gone
        out, unless the broker refused the connection."""
        outcome = Outcome.FAILED if never_reached(exc) else Outcome.UNKNOWN
        for index in chunk:
            self._end(index, outcome, exc)
        chunk.clear()

    def _land(self) -> bool:
        """Settle the chunk in the air (if any) with the broker's answers; whether the batch may
        go on."""
        air, self._air = self._air, []
        if not air:
            return True
        try:
            errors = self._sink.answers()
        except Exception as exc:
            self._failed(air, exc)
            return False
        if not any(errors):  # the usual chunk: every message taken, settled under one lock
            with self._lock:
                for index in air:
                    self.outcomes[index] = Outcome.SENT
                self._in_flight_since = time.monotonic()
            sent = self._sink.sent
            for index in air:
                sent(*self.slots[index])
            return True
        carry_on = True
        for index, error in zip(air, errors, strict=True):
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
        return carry_on
