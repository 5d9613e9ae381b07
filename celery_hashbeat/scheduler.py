"""The beat Scheduler: ``celery -A proj beat -S celery_hashbeat.Scheduler`` (or ``-S hashbeat``).

It keeps Celery's scheduler API (``tick``, ``setup_schedule``, ``schedule``, ``send``, ``close``)
and wires together the objects that do the work, each the one owner of its state:

- ``Catalog`` (entries/): the entries, built from the configuration and the store's definitions;
- ``StoreCalls``: the store connection; every call bounded, every failure told to the lease;
- ``Leadership``: the lease, take-over, operators' controls, the worker census, the balance;
- ``Dispatcher``: the slot queue; due -> claim -> verdict -> publish -> settle -> give back;
- ``Publisher`` (publish/): the broker connection, the batch sink, messages made ahead.

Only the lease holder enqueues; it claims every slot due in a tick with one store call and
publishes only what it claimed, with a task id derived from (entry, slot) (docs/design.md §5).
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import TYPE_CHECKING, Any, cast

from celery import beat
from celery.exceptions import ImproperlyConfigured

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.beat.backfill import Backfills
from celery_hashbeat.beat.census import WorkerCensus
from celery_hashbeat.beat.collector import building
from celery_hashbeat.beat.compat import (
    LiveSchedule,
    add_entry,
    apply_changes,
    warn_differences,
    warn_inert_settings,
)
from celery_hashbeat.beat.dispatch import Dispatcher
from celery_hashbeat.beat.hooks import SendHooks
from celery_hashbeat.beat.leadership import Leadership
from celery_hashbeat.beat.lease import Lease, new_token
from celery_hashbeat.beat.overlap import warn_unreachable_leases
from celery_hashbeat.beat.parking import Parking
from celery_hashbeat.beat.promises import PromiseKeeper
from celery_hashbeat.beat.standaside import StandAside
from celery_hashbeat.beat.stopping import GRACE, StopRequests
from celery_hashbeat.beat.storecalls import StoreCalls
from celery_hashbeat.beat.triggers import Triggers
from celery_hashbeat.beat.warming import Warming
from celery_hashbeat.control import running
from celery_hashbeat.control.polling import ControlState
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.observe.http import HealthServer, PortInUse
from celery_hashbeat.observe.metrics import Metrics
from celery_hashbeat.observe.watch import Watch
from celery_hashbeat.publish.message import send_slot
from celery_hashbeat.publish.publisher import PUBLISH_TIMEOUT_S, Publisher
from celery_hashbeat.settings import ConfigurationExit, Settings
from celery_hashbeat.store import open_store
from celery_hashbeat.store.errors import StoreConfigError
from celery_hashbeat.store.options import mask_url

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from celery import Celery
    from celery.beat import ScheduleEntry

logger = SCHEDULER

#: Celery's default ``--schedule`` file, which the beat command passes whether or not it was set.
CELERY_SCHEDULE_FILE = "celerybeat-schedule"


class Scheduler(beat.Scheduler):
    """A highly available beat scheduler for Celery, with hashed schedules and fenced enqueues."""

    #: Read by RedBeat's beat_init receiver, connected in any process that imports
    #: redbeat.schedulers (Sentry's Celery integration does): None says this is not its beat.
    lock_key = None

    store_calls: StoreCalls
    leadership: Leadership
    dispatcher: Dispatcher
    publisher: Publisher

    def __init__(self, app: Celery, *args: Any, **kwargs: Any) -> None:
        try:
            # Only the instance that runs warns: the banner's comes before logging is set up.
            self.settings = settings = Settings.from_conf(app.conf, warn=not kwargs.get("lazy"))
        except ImproperlyConfigured as exc:
            raise ConfigurationExit(exc) from None
        self.token = token = new_token()
        metrics = Metrics(settings.metrics_entry_labels)
        #: History, metrics and health (docs/design.md §14); metrics only when HTTP is served.
        self.watch = watch = Watch(token, metrics if settings.http_port is not None else None)
        self._http: HealthServer | None = None
        #: Wall-clock seconds since the epoch; slots are computed from it.
        self.clock: Callable[[], float] = time.time
        self._ticking = False
        self._close_requested = False
        self._closed = False
        self._closing_at: float | None = None
        self._stop = StopRequests()
        lease = Lease(settings, token)
        lease.watch = watch
        self.store_calls = calls = StoreCalls(self._gave_up, lease.failed)

        # The objects below call each other back: each callback reads its target when called, after
        # all of them are made.
        def added(entry: Entry, now: int) -> None:
            self._promises.note(entry)
            self.leadership.added(entry, now)

        self._catalog = catalog = Catalog(app, settings, self.now_ms, added)
        self.entries = catalog.entries
        #: Names of configured entries that could not run: their fences are kept.
        self.broken = catalog.broken
        controls = ControlState()
        parking = Parking(controls, catalog, watch, self.now_ms)
        #: Celery's send methods, overridden or patched: then every slot goes through them.
        self.hooks = hooks = SendHooks(self, OWN_SEND_METHODS)
        own_send = type(self).send is Scheduler.send
        self.publisher = publisher = Publisher(
            app,
            kwargs.get("Producer") or app.amqp.Producer,
            send=self.send,
            batchable=lambda: own_send and not hooks.hooked,
            announce=lambda entry, task_id, when: self.dispatcher.announce(  # noqa: PLW0108
                entry, task_id, when
            ),
            sent=lambda entry: self.dispatcher.sent(entry),  # noqa: PLW0108
            stop=self._stop,
            timeout_s=max(settings.lease_ttl, PUBLISH_TIMEOUT_S),
            entries=catalog.entries,
        )
        self.dispatcher = dispatcher = Dispatcher(
            token=token,
            entries=catalog.entries,
            watch=watch,
            calls=calls,
            lease=lease,
            publisher=publisher,
            parking=parking,
            now_ms=self.now_ms,
            clock_s=lambda: self.clock(),  # noqa: PLW0108 - the clock a test may replace
            retry_ms=lambda: int(self.max_wait * 1000),
            maintain=lambda: self.leadership.maintain(),  # noqa: PLW0108
        )
        self.leadership = Leadership(
            token=token,
            lease=lease,
            calls=calls,
            open_store=self._open_store,
            catalog=catalog,
            controls=controls,
            parking=parking,
            census=WorkerCensus(app, settings.workers_refresh),
            dispatcher=dispatcher,
            triggers=Triggers(
                token=token,
                calls=calls,
                publisher=publisher,
                entries=catalog.entries,
                copies=catalog.fanout.subs,
                watch=watch,
                now_ms=self.now_ms,
                backfills=Backfills(
                    token=token,
                    calls=calls,
                    dispatcher=dispatcher,
                    publisher=publisher,
                    entries=catalog.entries,
                    now_ms=self.now_ms,
                ),
            ),
            watch=watch,
            now_ms=self.now_ms,
        )
        self._promises = PromiseKeeper(token, calls, catalog, controls, watch)
        self._aside = StandAside(lease, calls, publisher, watch, dispatcher.owed)
        self._warming = Warming(catalog.entries, publisher, self.now_ms)
        filename = kwargs.get("schedule_filename")
        if filename and filename != CELERY_SCHEDULE_FILE and not kwargs.get("lazy"):
            logger.info(
                "beat: the schedule file %s is not used: celery_hashbeat keeps its state in the "
                "store (%s); the --schedule option can be left out",
                filename,
                mask_url(settings.store_url),
            )
        super().__init__(app, *args, **kwargs)
        self.watch.wait_at_most(self.max_wait)

    @property
    def max_wait(self) -> float:
        """The longest sleep between ticks (``beat_max_loop_interval``, or Celery's default)."""
        return float(cast(float, self.max_interval))

    @property
    def is_leader(self) -> bool:
        return self.leadership.leader

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # Loading the schedule ---------------------------------------------------------------------

    def setup_schedule(self) -> None:
        """Load (or reload) beat_schedule and Celery's default entries, then open the store."""
        with building():
            self.merge_inplace(self.app.conf.beat_schedule)
            self.install_default_entries(self.entries)
            self.leadership.lease.schedule_digest = self._catalog.digest()
            configured = dict(self._catalog.configured)
            self.leadership.lease.schedule_text = lambda: running.recorded(configured)
            warn_unreachable_leases(self.entries.values(), self.settings.store_url)
            warn_differences(self.entries.values(), self.settings)
            warn_inert_settings(self.app.conf)
        self.hooks.look()
        if self._catalog.fanout.subs and not self.app.conf.worker_direct:
            logger.warning(
                "beat: entries with 'workers' are sent to each worker's direct queue, which "
                "workers consume only with worker_direct=True: set it in the app's configuration"
            )
        if not self.store_calls.opened:
            self._open_store()
        if self.settings.http_port is not None and self._http is None:
            try:
                self._http = HealthServer(
                    self.watch, self.settings.http_host, self.settings.http_port, self.status
                ).start()
            except PortInUse as exc:
                raise ConfigurationExit(exc, self.app.conf) from None

    def merge_inplace(self, b: Mapping[str, Any]) -> None:
        self._catalog.merge(b)

    def update_from_dict(self, dict_: Mapping[str, Any]) -> None:
        """Add or replace entries; an entry that cannot run is logged by name and skipped."""
        self._catalog.update(dict_)

    def add(self, **kwargs: Any) -> ScheduleEntry:
        """Add an entry from ScheduleEntry's keywords (see ``compat.add_entry``)."""
        return add_entry(self._catalog, self.now_ms(), kwargs)

    def get_schedule(self) -> LiveSchedule:  # type: ignore[override]  # a mapping, as Celery's
        """The entries, live: what is written into it is scheduled, as in Celery."""
        return LiveSchedule(self._catalog)

    def set_schedule(self, schedule: dict[str, ScheduleEntry]) -> None:
        self.merge_inplace(schedule)

    schedule = property(get_schedule, set_schedule)

    def _open_store(self) -> None:
        settings = self.settings
        try:
            store = open_store(settings.store_url, settings.key_prefix, **settings.store_options)
        except StoreConfigError as exc:
            raise ConfigurationExit(exc, self.app.conf) from None
        except Exception as exc:
            self.leadership.lease.failed(exc, time.monotonic())
            return
        self.store_calls.open(store)

    # Ticking ----------------------------------------------------------------------------------

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """One pass: keep the lease, enqueue what is due, and say how long to sleep. A stop
        requested meanwhile is answered when the pass ends (see ``stopping``)."""
        self._stop.install()
        self._stop.ticking(True)
        self._ticking = True
        self.watch.ticked()
        try:
            return self._tick()
        finally:
            self._ticking = False
            if self._close_requested:
                self.close()
            self._stop.ticking(False)

    def _tick(self) -> float:
        leadership, dispatcher = self.leadership, self.dispatcher
        lease = leadership.lease
        if self._stop.requested:
            return 0.0
        self.hooks.look()
        shared = self._catalog.shared
        if shared.changed:
            apply_changes(self._catalog, shared.changed)
        # While the store does not answer, only the lease's backed-off calls try it.
        leadership.poll_controls()
        # A leader whose broker has taken nothing for too long gives up the lease before it
        # waits on that broker again for what is due.
        self._aside.tick()
        # What is due goes before a renewal that falls on the same instant, while the lease
        # surely holds.
        if lease.leader and time.monotonic() < lease.held_until:
            dispatcher.dispatch_due()
        if time.monotonic() >= lease.due_s:
            leadership.maintain()
        if lease.leader:
            leadership.take_census()
            leadership.share_balance()
            self._promises.keep(self.now_ms())
            dispatcher.dispatch_due()  # what a new leader found due
        else:
            self._warming.tick()  # the first burst after taking over costs no more than others
        head = dispatcher.queue.head() if lease.leader else None
        if head is not None:
            dispatcher.instants.make_ahead(head)  # reads the queue, takes nothing off it
            leadership.poll_ahead_of(head, self.now_ms())
        # Woken just before the slot, to be ready at its instant, or earlier to make its messages.
        to_slot = math.inf
        if head is not None:
            to_slot = dispatcher.instants.wake_at_ms(head) / 1000 - self.clock()
        # Idle, with plans to make for the next burst: make a share and come back for the next.
        if lease.leader and self._warming.lead(to_slot, lease.held_until - time.monotonic()):
            return 0.0
        wait = min(leadership.wake_s() - time.monotonic(), to_slot)
        return max(0.0, min(wait, self.max_wait))

    def should_sync(self) -> bool:
        """Never: everything worth keeping is in the store already."""
        return False

    # Publishing (Celery's hooks) --------------------------------------------------------------

    @property
    def connection(self) -> Any:
        """The broker connection the beat publishes on (the publisher's)."""
        return self.publisher.connection

    @property
    def producer(self) -> Any:
        return self.publisher.producer

    def send(self, entry: Entry, task_id: str, when: str) -> Any:
        """Publish one slot of ``entry`` (the hook benchmarks and subclasses replace), through
        Celery's send methods while one of them is hooked (``beat.hooks``)."""
        if self.hooks.hooked:
            return self.hooks.send(entry, task_id, when, self.publisher.producer)
        return send_slot(self.app, self.publisher.producer, entry, task_id, when)

    def apply_async(
        self, entry: ScheduleEntry, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        """Celery's, for a slot going through the hooks: never advanced (the dispatcher moves
        the entry on), and what it raises is the slot's outcome."""
        if self.hooks.routing(entry):
            advance = False
        try:
            return super().apply_async(entry, producer, advance, **kwargs)
        except Exception as exc:
            self.hooks.failed(entry, exc)
            raise

    # Shutting down ----------------------------------------------------------------------------

    def _gave_up(self) -> bool:
        """Whether a store call under way may be left behind: a stop or a close has waited
        long enough for it."""
        closing = self._closing_at
        return self._stop.overdue() or (closing is not None and time.monotonic() - closing >= GRACE)

    def close(self) -> None:
        """Release the lease, the store and the broker connection, waiting at most a moment for
        each. Called from a signal handler mid-tick, it waits for the tick to wind down."""
        if self._closed:
            return
        if self._ticking:
            self._close_requested = True
            return
        self._closed = True
        self._closing_at = time.monotonic()
        # Each step runs whatever the ones before it raised (last in, first run), so that the
        # helper threads always stop; what raised is raised again at the end.
        self._stop.shield()  # a second SIGTERM must not cut the lease release short
        with contextlib.ExitStack() as steps:
            steps.callback(self._stop.uninstall)  # last: Celery's handlers come back at the end
            steps.callback(self.store_calls.close)
            steps.callback(self.publisher.close, give_up=self._gave_up)
            steps.callback(self._release_store)
            if self._http is not None:
                steps.callback(self._http.close)
            self.sync()  # as Celery's close does: a subclass's sync runs at close

    def _release_store(self) -> None:
        """Write the history waiting, release the lease and close the store."""
        calls = self.store_calls
        if not calls.opened:
            return
        history = self.watch.outbox.drain()
        try:
            calls.call(calls.store.record, history)
        except Exception:
            logger.debug("beat: %d history record(s) not written", len(history), exc_info=True)
        self.leadership.lease.release(calls)
        try:
            calls.call(calls.store.close)
        except Exception:
            logger.debug("beat: closing the store failed", exc_info=True)

    def status(self) -> dict[str, Any]:
        """This beat as /status shows it: read from the HTTP thread, so only plain values."""
        lease = self.leadership.lease
        ready, why = self.watch.ready()
        return {
            "token": self.token,
            "role": "leader" if lease.leader else "standby",
            "leader": self.watch.holder,
            "lease_left_s": round(max(0.0, lease.held_until - time.monotonic()), 3)
            if lease.leader
            else None,
            "entries": self._catalog.count(),
            "broken_entries": sorted(self.broken.copy()),  # copied at once: read off-thread
            "store": {
                "url": mask_url(self.settings.store_url),
                "prefix": self.settings.key_prefix,
                "ready": ready,
                "detail": why,
            },
            "broker_outage": self.publisher.outage.cause,
            "seconds_since_tick": round(self.watch.since_tick(), 3),
        }

    @property
    def info(self) -> str:
        settings = self.settings
        return (
            f"    . store -> {mask_url(settings.store_url)} "
            f"(prefix {settings.key_prefix})\n"
            f"    . lease -> {settings.lease_ttl:g}s, renewed every {settings.renew_interval:g}s; "
            f"catch-up {settings.catch_up}"
        )


#: The send methods Scheduler defines in place of Celery's (each calls Celery's): another
#: function found in their place is a hook.
OWN_SEND_METHODS = {"apply_async": vars(Scheduler)["apply_async"]}
