"""The Publisher: claimed slots -> broker messages, on a thread the beat can stop waiting for.

It owns everything on the broker's side of a beat: the connection, the producer on it, the batch
sink (``sink``) that writes many messages per round trip, the messages made ahead of their slots
(``ahead``), the thread that waits on the broker, and whether the broker is in an outage. The
beat's ``Dispatcher`` decides what to publish and settles the outcomes; the Publisher only sends.
A connection left behind on a broker that stopped answering is never used again: the next
publish connects afresh (docs/design.md §10, §15).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from celery_hashbeat._background import Abandoned, Runner
from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat._outage import Once, Outage
from celery_hashbeat.publish.ahead import MARGIN_MS, Ahead, Upcoming
from celery_hashbeat.publish.batch import TRANSIENT_ERRORS, Batch, Outcome, Settled
from celery_hashbeat.publish.chunked import Bulk
from celery_hashbeat.publish.message import slot_iso, slot_task_id
from celery_hashbeat.publish.sink import BulkSink, unsupported

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.entries.entry import Entry

R = TypeVar("R")

#: The scheduler's logger: operators filter one name for everything a beat says about its slots.
logger = SCHEDULER

#: The most messages one broker round trip of a batch carries (one Redis pipeline).
CHUNK = 500

#: After a failed publish (its claim given back), the slot is retried this much later (ms).
PUBLISH_RETRY_MS = 1000

#: A publish that waits longer than this for the broker (seconds, at least) is left behind.
PUBLISH_TIMEOUT_S = 5.0

#: Per transport, the connection's options that bound a socket wait, set to the publish timeout
#: unless the app sets them (``broker_transport_options``): a thread left behind on a hung
#: broker then ends by itself, and the connect and the channel's set-up cannot wait forever.
SOCKET_BOUNDS = {
    "redis": ("socket_timeout", "socket_connect_timeout"),
    "amqp": ("read_timeout", "write_timeout"),
}


class Stopping(Protocol):
    """The beat's stop requests, as far as a publish waits on them."""

    @property
    def requested(self) -> bool: ...

    def overdue(self) -> bool: ...


class SendHook(Protocol):
    """``Scheduler.send``: publishes one slot of an entry (benchmarks and subclasses replace it)."""

    def __call__(self, entry: Entry, task_id: str, when: str) -> Any: ...


class Publisher:
    """Sends what the beat claimed; one per beat."""

    def __init__(
        self,
        app: Celery,
        producer_type: Any,
        *,
        send: SendHook,
        batchable: Callable[[], bool],
        announce: Callable[[Entry, str, str], None],
        sent: Callable[[Entry], None],
        stop: Stopping,
        timeout_s: float,
        entries: Mapping[str, Entry],
    ) -> None:
        self.app = app
        #: The schedule's entries, live (the batch sink keeps plans only for them).
        self._entries = entries
        self._producer_type = producer_type
        #: The hook each slot goes through when not sent by the batch sink.
        self._send = send
        #: False while every slot must go through ``send``: a subclass replaced it, or one of
        #: Celery's send methods is hooked. Asked once per batch.
        self._batchable = batchable
        #: Called before a slot's message goes out (its log line, a run it replaces) and after.
        self._announce = announce
        self._sent = sent
        self._stop = stop
        #: A publish waiting longer than this for the broker is left behind (seconds).
        self.timeout_s = timeout_s
        #: How far ahead of their slots messages were made (on this connection's sink).
        self.ahead = Ahead()
        #: Whether the broker answers; ``outage.cause`` is its last failure while it does not.
        self.outage = Outage(logger, "beat: the broker answers again (after: %(cause)s)")
        self._runner = Runner("hashbeat-publish")
        self._unbatched = Once()
        #: Since when (monotonic seconds) publishes have been tried and none reached the
        #: broker; None while they do.
        self.failing_since: float | None = None
        self._failed_at = 0.0

    # The connection and what lives on it ------------------------------------------------------

    @cached_property
    def connection(self) -> Any:
        connection = self.app.connection_for_write()
        if connection.transport_options is None:
            connection.transport_options = {}
        options = connection.transport_options  # the connection's own copy of the app's
        for name in SOCKET_BOUNDS.get(connection.transport.driver_type, ()):
            options.setdefault(name, self.timeout_s)
        return connection

    @cached_property
    def producer(self) -> Any:
        """A producer that connects on first publish, within the publish's own retry policy
        (Celery's connects up front and retries for minutes, deaf to a stop)."""
        return self._producer_type(self.connection, auto_declare=False)

    @property
    def sink(self) -> BulkSink | None:
        """The batch publisher on this producer, or None to send one message at a time: every
        slot must go through ``send`` now, or the transport is not one the batch path knows."""
        return self._bulk if self._batchable() else None

    @cached_property
    def _bulk(self) -> BulkSink | None:
        why = unsupported(self.producer)
        if why is not None:
            if self._unbatched.first():
                logger.info("beat: publishing one message at a time: the batch path %s", why)
            return None
        return BulkSink(self.app, self.producer, self._announce, self._sent, self._entries)

    @cached_property
    def transient_errors(self) -> tuple[type[BaseException], ...]:
        """What a publish raises while the broker cannot be reached: kombu's wrapper, the
        socket's errors, and the transport's own connection errors."""
        transport_errors = tuple(self.app.connection_for_write().connection_errors)
        return TRANSIENT_ERRORS + transport_errors

    def connect(self) -> None:
        """Connect to the broker if not connected, trying once: a refused or hung connection
        then fails where nothing can have been sent (kombu's own first connect, inside a
        publish, retries forever)."""
        self.connection.ensure_connection(
            max_retries=1, interval_start=0, interval_step=1, interval_max=1
        )

    def drop_connection(self) -> None:
        """Leave a publish thread stuck on the broker with the connection it is using (and the
        producer and batch sink on it); the next publish gets its own."""
        for name in ("producer", "connection", "_bulk"):
            self.__dict__.pop(name, None)
        self.ahead.reset()

    def revoke(self, task_id: str) -> None:
        """Revoke (and terminate) a run, on this beat's connection, once the batch's chunk in
        the air on it has its answers (``BulkSink.land``)."""
        bulk: BulkSink | None = self.__dict__.get("_bulk")
        if bulk is not None:
            bulk.land()
        self.app.control.revoke(task_id, terminate=True, connection=self.connection)

    # Publishing -------------------------------------------------------------------------------

    def send_slot(self, entry: Entry, slot: int) -> None:
        """One slot's message, through the ``send`` hook (the path of a slot the sink does not
        take)."""
        task_id, when = slot_task_id(entry.name, slot), slot_iso(slot)
        self._announce(entry, task_id, when)
        self._send(entry, task_id, when)
        self._sent(entry)

    def publish(
        self,
        slots: list[tuple[Entry, int]],
        leading: Callable[[], bool],
        hold: Callable[[], bool] | None = None,
    ) -> list[Settled[Entry]]:
        """Publish claimed slots on the broker's thread; cut the batch short on a stop, a
        broker that stops answering, or ``leading()`` turning false (it keeps the lease while
        waiting). With ``hold``, the messages are made and staged at once and the first one
        leaves once ``hold()`` returned (their instant came), none if it returned False."""
        sink = self.sink
        batch: Batch[Entry]
        errors, connect = self.transient_errors, self.connect
        if sink is None:
            batch = Batch(slots, self.send_slot, errors, connect, hold)
        else:
            batch = Bulk(slots, sink, self.send_slot, errors, connect, CHUNK, hold)

        hung: list[float] = []

        def give_up() -> bool:
            if self._stop.requested:
                batch.cancel()
                return self._stop.overdue()
            waited = batch.in_flight_for()
            if waited > self.timeout_s:
                hung.append(waited)
                return True
            return not leading()

        began = time.monotonic()
        self._wait_for(batch.run, give_up)
        settled = batch.settle()
        if hung:
            self.outage.failed(
                TimeoutError(f"no answer for {hung[0]:.0f}s"),
                "beat: the broker has not answered for %.0fs (connect, channel or publish); "
                "leaving that call behind (a message under way may or may not arrive) and "
                "trying again on a new connection",
                self.timeout_s,
                level=logging.ERROR,
            )
        self._tally(began, settled, bool(hung))
        return settled

    def _tally(self, began: float, settled: list[Settled[Entry]], hung: bool) -> None:
        """Keep ``failing_since``: cleared by a message that went out, set by a publish that
        sent nothing because the broker did not answer or refused. Failures count as one run
        only while they follow each other (a failed slot is retried a second later): one long
        after the last starts a new run."""
        now = time.monotonic()
        if any(each.outcome is Outcome.SENT for each in settled):
            self.failing_since = None
        elif hung or any(each.outcome in (Outcome.FAILED, Outcome.UNKNOWN) for each in settled):
            lapsed = now - self._failed_at > self.timeout_s + 2 * PUBLISH_RETRY_MS / 1000
            if self.failing_since is None or lapsed:
                self.failing_since = began
            self._failed_at = now

    @property
    def stuck(self) -> bool:
        """Whether nothing has reached the broker for longer than a publish may wait."""
        since = self.failing_since
        return since is not None and time.monotonic() - since >= self.timeout_s

    def probe(self) -> bool:
        """Whether the broker takes a connection now, waiting no longer than a publish may
        (for a beat that gave up the lease over a stuck broker: it leads again once it does)."""
        began = time.monotonic()
        try:
            self._runner.call(
                self.connect,
                give_up=lambda: self._stop.overdue() or time.monotonic() - began > self.timeout_s,
            )
        except Abandoned:
            self.drop_connection()
            return False
        except Exception:
            return False
        self.failing_since = None
        self.outage.answered()
        return True

    def send_each(
        self, runs: list[tuple[R, int]], send_one: Callable[[R, int], None]
    ) -> list[Settled[R]]:
        """Send ``runs`` one by one with ``send_one`` (triggers: each has its own task id)."""
        batch = Batch(runs, send_one, self.transient_errors, self.connect)
        self._wait_for(
            batch.run,
            lambda: self._stop.overdue() or batch.in_flight_for() > self.timeout_s,
        )
        return batch.settle()

    def _wait_for(self, run: Callable[[], None], give_up: Callable[[], bool]) -> None:
        try:
            self._runner.call(run, give_up=give_up)
        except Abandoned:
            self.drop_connection()

    # Messages made ahead ------------------------------------------------------------------------

    def take_ahead(self, queue: Upcoming, head: int, now: int) -> list[tuple[Entry, int]] | None:
        """The slots whose messages to make now (see ``ahead``), or None when none are to be
        made: not yet time, the broker in an outage, or no batch sink to make them with."""
        if not self.ahead.due(head, now) or self.outage.cause is not None:
            return None
        if self.sink is None:
            self.ahead.skip(now)  # nothing can be made ahead: woken at the slot
            return None
        return self.ahead.take(queue, now)

    def make_ahead(
        self, slots: list[tuple[Entry, int]], wake: int, now: int, clock_ms: Callable[[], int]
    ) -> None:
        """Make the messages of ``slots`` (in the order they are due) on the broker's thread,
        and pack the write of the first slot's (``BulkSink.prepare``), stopping ``MARGIN_MS``
        before the leader wakes for the next slot (at ``wake``) so that this never delays it."""
        sink = self.sink
        assert sink is not None  # take_ahead handed out slots
        deadline = wake - MARGIN_MS

        def make() -> None:
            self.connect()
            sink.forget_ready(now)
            for entry, slot in slots:
                if clock_ms() >= deadline:
                    return
                try:
                    sink.ready(entry, slot)
                except self.transient_errors:
                    raise
                except Exception:  # made again at its slot, where it is reported
                    continue
            if slots:
                first = slots[0][1]
                sink.prepare([(entry, slot) for entry, slot in slots if slot == first])

        self._make_on_broker_thread(make, self.timeout_s, self._stop.overdue, "messages ahead")

    def warm(self, entries: Iterator[tuple[Entry, int]], budget_s: float) -> bool:
        """As a standby, make plans and stencils for ``entries`` (each with one of its slots)
        on the broker's thread, for up to ``budget_s`` (see ``BulkSink.warm``); whether
        ``entries`` ran out, or the broker did not answer within a second more (ended quietly:
        a leader's publish reports that)."""
        sink = self.sink
        if sink is None or self.outage.cause is not None:
            return True
        done = False

        def make() -> None:
            nonlocal done
            self.connect()
            until = time.monotonic() + budget_s
            for entry, slot in entries:
                try:
                    sink.warm(entry, slot)
                except self.transient_errors:
                    raise
                except Exception:  # made again at its slot, where it is reported
                    continue
                if time.monotonic() >= until:
                    return
            done = True

        returned = self._make_on_broker_thread(
            make, budget_s + 1.0, lambda: self._stop.requested, "plans"
        )
        return done or not returned

    def _make_on_broker_thread(
        self, make: Callable[[], None], bound_s: float, stopping: Callable[[], bool], what: str
    ) -> bool:
        """Run ``make`` on the broker's thread, left behind after ``bound_s`` or on a stop;
        whether it returned in time. A broker that does not answer ends it quietly: the slots'
        own publish says so, and retries."""
        began = time.monotonic()
        try:
            self._wait_for(make, lambda: stopping() or time.monotonic() - began > bound_s)
        except Exception:
            logger.debug("beat: could not make %s", what, exc_info=True)
            return False
        return time.monotonic() - began <= bound_s

    @property
    def kept(self) -> int:
        """How many message plans the sink keeps (long-lived objects, see ``collector``)."""
        sink = self.__dict__.get("_bulk")
        return 0 if sink is None else sink.kept

    # The broker's state -------------------------------------------------------------------------

    def note_outcome(self, failure: BaseException | None, waiting: int, sent: bool) -> None:
        """One log line when the broker stops answering and one when it answers again."""
        if failure is not None:
            self.outage.failed(
                failure,
                "beat: the broker is not answering (%s: %s): %d slot(s) given back and retried "
                "every %.0fs until it does",
                type(failure).__name__,
                failure,
                waiting,
                PUBLISH_RETRY_MS / 1000,
            )
        elif sent:
            self.outage.answered()

    def close(self, give_up: Callable[[], bool]) -> None:
        """Release the connection (on the broker's thread, waiting at most as ``give_up``
        allows), then let the thread end."""
        try:
            self._runner.call(self._release, give_up=give_up)
        except Abandoned:
            logger.info("beat: the broker did not answer the goodbye; leaving its connection")
        self._runner.close()

    def _release(self) -> None:
        for name in ("producer", "_bulk"):
            self.__dict__.pop(name, None)
        connection = self.__dict__.pop("connection", None)
        if connection is not None:
            try:
                connection.release()
            except Exception:
                logger.debug("beat: releasing the broker connection failed", exc_info=True)
