"""Publishing one tick's claimed slots, with an exact account of what went out.

The slots go out on a helper thread while the scheduler's main thread waits, so that the main
thread can renew the lease inside a long batch, answer a stop, and leave a hung broker behind:
one message at a time (``Batch``), or in chunks through a ``Sink`` that sends each chunk in one go
(``Bulk``). Each slot ends in exactly one state:

- ``SENT``: the broker took the message;
- ``DROPPED``: the message can never be sent (it cannot be serialised, names an unknown queue...);
- ``FAILED``: the broker refused the connection, so the message surely never reached it: the
  claim is to be given back and retried;
- ``UNSENT``: never started, because the batch was cut short (or the instant it was held for
  did not come): the claim is to be given back;
- ``UNKNOWN``: the connection broke or timed out mid-publish, or the message was still under way
  when the batch was cut short: it may have gone out or not, so its claim is kept (at most once).

A batch may be held for its slots' instant (``hold``): everything is made and staged at once,
and the first message leaves only once ``hold()`` returned True; if it returned False nothing
leaves (docs/design.md §15).

Each message gets one attempt (the scheduler turns Celery's publish retry off): a retry after a
connection lost mid-publish could send the message twice. The connection is made before each
message starts, so a batch cut short while connecting gives that slot back too. After the first
``FAILED`` or ``UNKNOWN`` slot the batch stops, and the rest are given back: a broker in trouble
would fail every message the same way.
"""

from __future__ import annotations

import enum
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, NamedTuple, Protocol, TypeVar

from kombu.exceptions import OperationalError

E = TypeVar("E")
E_contra = TypeVar("E_contra", contravariant=True)


class Outcome(enum.Enum):
    SENT = "sent"
    DROPPED = "dropped"
    FAILED = "failed"
    UNSENT = "unsent"
    UNKNOWN = "unknown"


class Settled(NamedTuple, Generic[E]):
    """One slot of a batch, as it ended."""

    entry: E
    slot: int
    outcome: Outcome
    error: BaseException | None


#: Errors that mean "the broker is not reachable now", whatever the transport; anything else a
#: publish raises is a property of the message and would fail the same way every time.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (OperationalError, OSError, TimeoutError)


def never_reached(exc: BaseException) -> bool:
    """Whether a failed publish surely sent nothing: the connection was refused, or the broker's
    name did not resolve (kombu wraps the socket's error; look down the chain)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ConnectionRefusedError | socket.gaierror):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


class Batch(Generic[E]):
    """The publish of one tick's claimed slots; ``run`` on a helper thread, the rest anywhere."""

    def __init__(
        self,
        slots: Sequence[tuple[E, int]],
        send: Callable[[E, int], object],
        transient: tuple[type[BaseException], ...] = TRANSIENT_ERRORS,
        connect: Callable[[], object] = lambda: None,
        hold: Callable[[], bool] | None = None,
    ) -> None:
        self.slots = slots
        self._send = send
        self._connect = connect
        self._transient = transient
        #: Waits for the instant the batch's slots are due, once, before anything leaves; False
        #: if it did not come (the batch is then cut short: its slots given back).
        self._hold = hold
        self._lock = threading.Lock()
        self._cancelled = False
        self._started = 0
        self._in_flight_since: float | None = None
        self.outcomes: list[Outcome | None] = [None] * len(slots)
        self.errors: list[BaseException | None] = [None] * len(slots)

    def run(self) -> None:
        for index, (entry, slot) in enumerate(self.slots):
            with self._lock:
                if self._cancelled:
                    return
                self._in_flight_since = time.monotonic()
            try:
                self._connect()
            except Exception as exc:  # whatever it is, no message has left yet
                self._end(index, Outcome.FAILED, exc)
                return
            if not self._held():
                return
            with self._lock:
                if self._cancelled:  # cut short while connecting: the slot is given back
                    return
                self._started = index + 1
            try:
                self._send(entry, slot)
            except Exception as exc:
                outcome = self._classify(exc)
                self._end(index, outcome, exc)
                if outcome is not Outcome.DROPPED:
                    return
            else:
                self._end(index, Outcome.SENT, None)

    def _held(self) -> bool:
        """Hold the first message until the slots' instant (``hold``); whether the batch may
        go on. Asked before every message leaves; waits only the first time."""
        hold, self._hold = self._hold, None
        if hold is None or hold():
            return True
        self.cancel()
        return False

    def _end(self, index: int, outcome: Outcome, error: BaseException | None) -> None:
        with self._lock:
            self.outcomes[index] = outcome
            self.errors[index] = error
            self._in_flight_since = None

    def _classify(self, exc: BaseException) -> Outcome:
        if not isinstance(exc, self._transient):
            return Outcome.DROPPED
        return Outcome.FAILED if never_reached(exc) else Outcome.UNKNOWN

    def cancel(self) -> None:
        """Start no further message; the one under way (if any) is left to finish."""
        with self._lock:
            self._cancelled = True

    def in_flight_for(self) -> float:
        """How long the message under way has been waiting for the broker (0 if none)."""
        since = self._in_flight_since
        return 0.0 if since is None else time.monotonic() - since

    def settle(self) -> list[Settled[E]]:
        """Every slot with its outcome, once the batch has ended or been cancelled."""
        self.cancel()
        with self._lock:
            started = self._started
            outcomes = list(self.outcomes)
        settled = []
        for index, (entry, slot) in enumerate(self.slots):
            outcome = outcomes[index]
            if outcome is None:
                outcome = Outcome.UNKNOWN if index < started else Outcome.UNSENT
            settled.append(Settled(entry, slot, outcome, self.errors[index]))
        return settled


class MayHaveGone(Exception):  # noqa: N818 - an outcome, not a failure of the caller
    """A message the broker answered with an error, though it may have taken it."""


class Undeliverable(Exception):  # noqa: N818 - the broker's answer, not a failure of the caller
    """A message the broker refused for a reason every slot of its entry shares (an exchange it
    does not have): the slot is dropped and the batch goes on with the others."""


class Sink(Protocol[E_contra]):
    """Where a ``Bulk`` batch puts its messages (``bulk.BulkSink``)."""

    @property
    def immediate(self) -> bool:
        """Whether ``stage`` sends at once (AMQP) rather than buffering until ``send``."""

    def direct(self, entry: E_contra) -> bool:
        """Whether this entry's slots must go one by one through ``send`` instead."""

    def stage(self, entry: E_contra, slot: int) -> None:
        """Build the slot's message and buffer it (or send it, if immediate)."""

    def send(self) -> None:
        """Start sending what is buffered, in as few writes as the transport allows; the next
        chunk may be built while the broker handles this one. Raises if the write failed."""

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

    While the broker handles a chunk, the next one is built, and it is sent only once the one
    before it has its answers: a chunk is in the air at most, and a cut, a hold, a failed or
    refused chunk stops the next one before it leaves, as if built after.

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
        return True

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
