"""Publishing one tick's claimed slots, with an exact account of what went out.

The slots go out on a helper thread while the scheduler's main thread waits, so that the main
thread can renew the lease inside a long batch, answer a stop, and leave a hung broker behind:
one message at a time (``Batch``), or in chunks through a sink that sends each chunk in one go
(``chunked.Bulk``). Each slot ends in exactly one state:

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
from typing import Generic, NamedTuple, TypeVar

from kombu.exceptions import OperationalError

E = TypeVar("E")


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
