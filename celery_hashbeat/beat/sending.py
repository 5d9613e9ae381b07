"""The broker side of a tick: publishing the slots a leader claimed, and the triggers.

The scheduler (``scheduler``) decides what is due and claims it; this half sends it. Claimed
slots go out as one batch on the publishing thread (``publishing``, through the batch path of
``bulk`` where the transport allows), their messages made before they were due (``ahead``); each
slot then moves on by its outcome, and those that surely did not go out are given back to the
store to be retried (DESIGN.md §5, §10). Triggers go out one by one, with their own task ids.
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import TYPE_CHECKING, Any

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.beat.ahead import MARGIN_MS
from celery_hashbeat.beat.background import Abandoned
from celery_hashbeat.beat.collector import PASS_ROOM_MS
from celery_hashbeat.beat.compat import BEAT_LOGGER
from celery_hashbeat.beat.triggers import Run, runs_of, settle
from celery_hashbeat.publish.batch import TRANSIENT_ERRORS, Batch, Bulk, Outcome, Settled
from celery_hashbeat.publish.message import send_slot, slot_iso, slot_task_id
from celery_hashbeat.publish.sink import BulkSink, unsupported

if TYPE_CHECKING:
    from collections.abc import Callable

    from celery import Celery

    from celery_hashbeat.beat.ahead import Ahead
    from celery_hashbeat.beat.background import Runner
    from celery_hashbeat.beat.collector import Freezer
    from celery_hashbeat.beat.lease import Lease
    from celery_hashbeat.beat.overlap import Overlaps
    from celery_hashbeat.beat.slotqueue import SlotQueue
    from celery_hashbeat.beat.stopping import StopRequests
    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.entries.fanout import FanOut
    from celery_hashbeat.observe.watch import Watch
    from celery_hashbeat.store.base import Store

#: The scheduler's logger: operators filter one name for everything a beat says about its slots.
logger = SCHEDULER

#: The most messages one broker round trip of a batch carries (one Redis pipeline).
CHUNK = 500

#: After a failed publish (its claim given back), the slot is retried this much later (ms).
PUBLISH_RETRY_MS = 1000


class Sending:
    """What ``Scheduler`` does with the broker (a mixin: it shares the scheduler's state)."""

    app: Celery
    token: str
    watch: Watch
    entries: dict[str, Entry]
    publish_timeout: float
    connection: Any
    Producer: Any
    _store: Store | None
    _lease: Lease
    _stop: StopRequests
    _broker_io: Runner
    _queue: SlotQueue
    _owed: dict[str, int]
    _published: dict[str, tuple[str, int]]
    _overlaps: Overlaps
    _fanout: FanOut
    _ahead: Ahead
    _freezer: Freezer
    _broker_outage: str | None
    _said_unbatched: bool
    now_ms: Callable[[], int]
    _plan: Callable[..., Any]
    _requeue: Callable[[Entry, int], None]
    _maintain: Callable[[], None]

    def _send_triggers(self, store: Store) -> None:
        """Take the waiting triggers (under the lease) and send each once; give back those
        that surely did not go out."""
        try:
            taken = store.take_triggers(self.token)
        except Exception as exc:
            self._lease.failed(exc, time.monotonic())
            return
        runs = runs_of(taken, self.entries, self._fanout.subs)
        if not runs:
            return
        batch = Batch(runs, self._send_trigger, self.transient_errors, self._connect)
        try:
            self._broker_io.call(
                batch.run,
                give_up=lambda: (
                    self._stop.overdue() or batch.in_flight_for() > self.publish_timeout
                ),
            )
        except Abandoned:
            self._drop_connection()
        back = settle(batch.settle(), self.watch, self.now_ms())
        if back:
            try:
                store.give_back_triggers(self.token, back)
            except Exception as exc:
                self._lease.failed(exc, time.monotonic())

    def _send_trigger(self, run: Run, asked: int) -> None:
        entry, _, task_id = run
        BEAT_LOGGER.info("Scheduler: Sending triggered task %s (%s)", entry.name, entry.task)
        send_slot(self.app, self.producer, entry, task_id, slot_iso(asked), trigger=True)

    def _make_ahead(self, head: int) -> None:
        """While nothing is due, make the messages of the slots due next (see ``ahead``); with
        time to spare, write the history waiting rather than send it with the next claim."""
        now = self.now_ms()
        if not self._ahead.due(head, now) or self._broker_outage is not None:
            return
        sink = self.sink
        if sink is None:
            self._ahead.skip(now)  # nothing can be made ahead: woken at the slot
            return
        slots = self._ahead.take(self._queue, now)
        store = self._store
        if store is not None and head - now > self._ahead.window_ms // 2 and self.watch.outbox:
            history = self.watch.outbox.drain()
            try:
                store.record(history)
            except Exception as exc:
                self._lease.failed(exc, time.monotonic())
                return
        deadline = head - MARGIN_MS

        def make() -> None:
            self._connect()
            sink.forget_ready(now)
            for entry, slot in slots:
                if self.now_ms() >= deadline:
                    return
                try:
                    sink.ready(entry, slot)
                except self.transient_errors:
                    raise
                except Exception:  # made again at its slot, where it is reported
                    continue

        began = time.monotonic()
        try:
            self._broker_io.call(
                make,
                give_up=lambda: (
                    self._stop.overdue() or time.monotonic() - began > self.publish_timeout
                ),
            )
        except Abandoned:
            self._drop_connection()
        except Exception:
            # The broker is not answering: the slots' own publish says so, and retries.
            logger.debug("beat: could not make messages ahead", exc_info=True)
        if head - self.now_ms() > PASS_ROOM_MS:
            self._freezer.grown(sink.kept)

    def _publish_batch(self, slots: list[tuple[Entry, int]]) -> list[Settled[Entry]]:
        """Publish on the helper thread; renew the lease while waiting, and cut the batch short
        on a stop, a lost lease or a broker that stops answering."""
        sink = self.sink
        batch: Batch[Entry]
        if sink is None:
            batch = Batch(slots, self._send_slot, self.transient_errors, self._connect)
        else:
            batch = Bulk(slots, sink, self._send_slot, self.transient_errors, self._connect, CHUNK)

        def give_up() -> bool:
            if self._stop.requested:
                batch.cancel()
                return self._stop.overdue()
            if batch.in_flight_for() > self.publish_timeout:
                logger.error(
                    "beat: the broker has not answered a publish for %.0fs; leaving it behind "
                    "(its slot may or may not arrive) and retrying the rest on a new connection",
                    self.publish_timeout,
                )
                return True
            if time.monotonic() >= self._lease.due:
                self._maintain()
            return not self._lease.leader

        try:
            self._broker_io.call(batch.run, give_up=give_up)
        except Abandoned:
            self._drop_connection()
        return batch.settle()

    def _drop_connection(self) -> None:
        """Leave a publish thread stuck on the broker with the connection it is using (and the
        producer and batch sink on it); the next publish gets its own."""
        for name in ("producer", "connection", "sink"):
            self.__dict__.pop(name, None)
        self._ahead.reset()

    def _settle(self, store: Store, settled: list[Settled[Entry]], now: int) -> None:
        """Move every entry on by its outcome; give back, in one call, the claims whose slot
        did not go out, to be retried shortly."""
        back: dict[str, int] = {}
        failure: BaseException | None = None
        for entry, slot, outcome, error in settled:
            if outcome is Outcome.FAILED or outcome is Outcome.UNSENT:
                self._published.pop(entry.name, None)
                if outcome is Outcome.FAILED:
                    self.watch.publish_failed()
                back[entry.name] = slot
                self._queue.push(entry, now + PUBLISH_RETRY_MS)
                failure = failure or error
                continue
            published = self._published.pop(entry.name, None)
            if outcome is Outcome.SENT:
                entry.last_slot = slot
                entry.total_run_count += 1
                if published is not None:
                    self.watch.sent(entry.name, slot, *published)
            elif outcome is Outcome.DROPPED:
                self.watch.publish_failed()
                logger.error(
                    "beat: %s slot %s can never be sent, so it is dropped (%s: %s); fix the "
                    "entry's args, kwargs or options",
                    entry.name,
                    slot_iso(slot),
                    type(error).__name__,
                    error,
                )
            else:
                self.watch.publish_failed()
                failure = failure or error
                logger.warning(
                    "beat: %s slot %s may or may not have reached the broker (%s); it is not "
                    "sent again (at most once per slot)",
                    entry.name,
                    slot_iso(slot),
                    "cut short" if error is None else f"{type(error).__name__}: {error}",
                )
            self._owed.pop(entry.name, None)
            self._plan(entry, now, entry.advance, slot, now)
            self._requeue(entry, now)
        self._broker_state(failure, len(back), any(s.outcome is Outcome.SENT for s in settled))
        if back:
            self._give_back(store, back)

    def _broker_state(self, failure: BaseException | None, waiting: int, sent: bool) -> None:
        """One log line when the broker stops answering and one when it answers again."""
        if failure is not None:
            if self._broker_outage is None:
                logger.warning(
                    "beat: the broker is not answering (%s: %s): %d slot(s) given back and "
                    "retried every %.0fs until it does",
                    type(failure).__name__,
                    failure,
                    waiting,
                    PUBLISH_RETRY_MS / 1000,
                )
            self._broker_outage = str(failure) or type(failure).__name__
        elif sent and self._broker_outage is not None:
            logger.info("beat: the broker answers again (after: %s)", self._broker_outage)
            self._broker_outage = None

    def _give_back(self, store: Store, back: dict[str, int]) -> None:
        runs = {
            name: slot_task_id(name, slot)
            for name, slot in back.items()
            if self.entries.get(name) is not None and self.entries[name].run_ttl_ms
        }
        try:
            given = store.unclaim(self.token, back, runs)
        except Exception as exc:
            given = set()
            self._lease.failed(exc, time.monotonic())
        for name in given:
            self._owed.pop(name, None)
        kept = len(back) - len(given)
        if kept:
            logger.warning(
                "beat: %d claimed slot(s) could not be given back (%s); this beat sends them "
                "when it leads again, and until then they are owed",
                kept,
                ", ".join(sorted(set(back) - given)[:5]),
            )

    # Publishing -------------------------------------------------------------------------------

    def _connect(self) -> None:
        """Connect to the broker if not connected, trying once: a refused or hung connection
        then fails where nothing can have been sent (kombu's own first connect, inside a
        publish, retries forever)."""
        self.connection.ensure_connection(
            max_retries=1, interval_start=0, interval_step=1, interval_max=1
        )

    def _send_slot(self, entry: Entry, slot: int) -> None:
        task_id, when = slot_task_id(entry.name, slot), slot_iso(slot)
        self._announce(entry, task_id, when)
        self.send(entry, task_id, when)
        self._sent(entry)

    def _announce(self, entry: Entry, task_id: str, when: str) -> None:
        """What comes before a slot's message: revoking the run it replaces, the log line, and
        noting when it went."""
        replaced = self._overlaps.replacing.get(entry.name)
        if replaced is not None:
            logger.info(
                "beat: %s slot %s replaces its run %s: revoking it", entry.name, when, replaced
            )
            self.app.control.revoke(replaced, terminate=True, connection=self.connection)
        BEAT_LOGGER.info(
            "Scheduler: Sending due task %s (%s) slot %s", entry.name, entry.task, when
        )
        self._published[entry.name] = (task_id, self.now_ms())

    def _sent(self, entry: Entry) -> None:
        # Kept until the slot went out: a slot given back and sent again revokes again.
        self._overlaps.replacing.pop(entry.name, None)

    @cached_property
    def transient_errors(self) -> tuple[type[BaseException], ...]:
        """What a publish raises while the broker cannot be reached: kombu's wrapper, the
        socket's errors, and the transport's own connection errors."""
        transport_errors = tuple(self.app.connection_for_write().connection_errors)
        return TRANSIENT_ERRORS + transport_errors

    @cached_property
    def producer(self) -> Any:
        """A producer that connects on first publish, within the publish's own retry policy
        (Celery's connects up front and retries for minutes, deaf to a stop)."""
        return self.Producer(self.connection, auto_declare=False)

    @cached_property
    def sink(self) -> BulkSink | None:
        """The batch publisher on this producer, or None to send one message at a time: a
        subclass replaced ``send``, or the transport is not one the batch path knows."""
        if type(self).send is not Sending.send:
            return None
        why = unsupported(self.producer)
        if why is not None:
            if not self._said_unbatched:
                logger.info("beat: publishing one message at a time: the batch path %s", why)
                self._said_unbatched = True
            return None
        return BulkSink(self.app, self.producer, self._announce, self._sent)

    def send(self, entry: Entry, task_id: str, when: str) -> Any:
        """Publish one slot of ``entry`` (the hook benchmarks and subclasses replace)."""
        return send_slot(self.app, self.producer, entry, task_id, when)
