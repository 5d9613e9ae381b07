"""The beat Scheduler: ``celery -A proj beat -S celery_hashbeat.Scheduler`` (or ``-S hashbeat``).

Entries wait in a heap keyed by their next slot (UTC epoch ms), so an idle tick costs the same at
ten entries or a hundred thousand, and returns exactly the time until the next slot or the next
lease call. Only the lease holder enqueues; it claims every slot due in a tick with one store call
and publishes only what it claimed (DESIGN.md §5), with a task id derived from (entry, slot).

This module keeps the tick and the claim; what a beat does on becoming leader and on operators'
changes is in ``leading``, and the broker side (publishing what was claimed) in ``sending``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, cast

from celery import beat
from celery.exceptions import ImproperlyConfigured
from celery.utils.log import get_logger

from celery_hashbeat.beat.ahead import Ahead
from celery_hashbeat.beat.background import Abandoned, Guarded, Runner
from celery_hashbeat.beat.collector import Freezer, building
from celery_hashbeat.beat.compat import (
    LiveSchedule,
    apply_changes,
    serve_from,
    warn_differences,
)
from celery_hashbeat.beat.leadership import Leading
from celery_hashbeat.beat.lease import Lease, new_token
from celery_hashbeat.beat.overlap import (
    WAIT_POLL_MS,
    Overlaps,
    Verdict,
    run_guard,
    warn_unreachable_leases,
)
from celery_hashbeat.beat.sending import Sending
from celery_hashbeat.beat.slotqueue import SlotQueue
from celery_hashbeat.beat.stopping import GRACE, StopRequests
from celery_hashbeat.control.polling import Controls
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.entries.errors import EntryError, EntryFinished, ScheduleEnded, ScheduleTooSlow
from celery_hashbeat.entries.fanout import WorkerCensus
from celery_hashbeat.observe.http import HealthServer, PortInUse
from celery_hashbeat.observe.metrics import Metrics
from celery_hashbeat.observe.watch import Watch
from celery_hashbeat.settings import ConfigurationExit, Settings
from celery_hashbeat.store import open_store
from celery_hashbeat.store.base import StoreConfigError, StoreUnavailable
from celery_hashbeat.store.options import mask_url

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from celery import Celery
    from celery.beat import ScheduleEntry

    from celery_hashbeat.store.base import Store

logger = get_logger(__name__)

#: The most slots claimed in one store call; a larger backlog is drained over consecutive ticks.
BATCH = 1000

#: Celery's default ``--schedule`` file, which the beat command passes whether or not it was set.
CELERY_SCHEDULE_FILE = "celerybeat-schedule"

#: A publish that waits longer than this for the broker (seconds, at least) is left behind.
PUBLISH_TIMEOUT = 5.0


class Scheduler(Leading, Sending, beat.Scheduler):
    """A highly available beat scheduler for Celery, with hashed schedules and fenced enqueues."""

    def __init__(self, app: Celery, *args: Any, **kwargs: Any) -> None:
        try:
            # Only the instance that runs warns: the banner's comes before logging is set up.
            self.settings = Settings.from_conf(app.conf, warn=not kwargs.get("lazy"))
        except ImproperlyConfigured as exc:
            raise ConfigurationExit(exc) from None
        self.token = new_token()
        metrics = Metrics(self.settings.metrics_entry_labels)
        #: History, metrics and health (DESIGN.md §14); metrics only when HTTP is served.
        self.watch = Watch(self.token, metrics if self.settings.http_port is not None else None)
        self._http: HealthServer | None = None
        #: Wall-clock seconds since the epoch; slots are computed from it.
        self.clock: Callable[[], float] = time.time
        self._catalog = Catalog(app, self.settings, self.now_ms, self._added)
        self.entries = self._catalog.entries
        #: Names of configured entries that could not run: their fences are kept.
        self.broken = self._catalog.broken
        self._shared = self._catalog.shared
        #: Made before the schedule is built, so frozen with it (see ``slotqueue``).
        self._queue = SlotQueue(self._catalog.entries)
        self._store: Store | None = None
        self._lease = Lease(self.settings, self.token)
        self._lease.watch = self.watch
        self._ticking = False
        self._close_requested = False
        self._closed = False
        self._closing_at: float | None = None
        self._stop = StopRequests()
        self._store_io = Runner("hashbeat-store")
        self._broker_io = Runner("hashbeat-publish")
        #: Slots this beat claimed and has not sent (entry -> slot), to send when it leads again.
        self._owed: dict[str, int] = {}
        self._broker_outage: str | None = None
        #: Whether the one line saying the batch path is not used was logged.
        self._said_unbatched = False
        #: Entries whose schedule failed to plan, so the traceback is logged once only.
        self._unplanned: set[str] = set()
        #: Whether a standby has yet to read last_run_at and total_run_count from the store.
        self._unserved = True
        self._fanout = self._catalog.fanout
        self._balancer = self._catalog.balancer
        #: The balancer's version last kept in the store by this beat as leader.
        self._balance_shared = -1
        self._census = WorkerCensus(app, self.settings.workers_refresh)
        self._overlaps = Overlaps(self._skipped)
        #: What operators changed in the store (DESIGN.md §13).
        self._controls = Controls()
        #: Paused entries taken off the queue at their slot, until they are resumed.
        self._parked: dict[str, Entry] = {}
        #: Entry -> (task id, publish time in ms) of the slot now being published.
        self._published: dict[str, tuple[str, int]] = {}
        #: How far ahead of their slots messages were made.
        self._ahead = Ahead()
        #: Keeps the collector's full passes off the plans made as entries are first sent.
        self._freezer = Freezer()
        #: A publish waiting longer than this for the broker is left behind (seconds).
        self.publish_timeout = max(self.settings.lease_ttl, PUBLISH_TIMEOUT)
        filename = kwargs.get("schedule_filename")
        if filename and filename != CELERY_SCHEDULE_FILE and not kwargs.get("lazy"):
            logger.info(
                "beat: the schedule file %s is not used: celery_hashbeat keeps its state in the "
                "store (%s); the --schedule option can be left out",
                filename,
                mask_url(self.settings.store_url),
            )
        super().__init__(app, *args, **kwargs)
        self.watch.wait_at_most(self.max_wait)

    @property
    def max_wait(self) -> float:
        """The longest sleep between ticks (``beat_max_loop_interval``, or Celery's default)."""
        return float(cast(float, self.max_interval))

    @property
    def is_leader(self) -> bool:
        return self._lease.leader

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # Loading the schedule ---------------------------------------------------------------------

    def setup_schedule(self) -> None:
        """Load (or reload) beat_schedule and Celery's default entries, then open the store."""
        with building():
            self.merge_inplace(self.app.conf.beat_schedule)
            self.install_default_entries(self.entries)
            self._lease.schedule_digest = self._catalog.digest()
            warn_unreachable_leases(self.entries.values(), self.settings.store_url)
            warn_differences(self.entries.values(), self.settings)
        if self._fanout.subs and not self.app.conf.worker_direct:
            logger.warning(
                "beat: entries with 'workers' are sent to each worker's direct queue, which "
                "workers consume only with worker_direct=True: set it in the app's configuration"
            )
        if self._store is None:
            self._open_store()
        if self.settings.http_port is not None and self._http is None:
            try:
                self._http = HealthServer(
                    self.watch, self.settings.http_host, self.settings.http_port, self.status
                ).start()
            except PortInUse as exc:
                raise ConfigurationExit(exc) from None

    def merge_inplace(self, b: Mapping[str, Any]) -> None:
        self._catalog.merge(b)

    def update_from_dict(self, dict_: Mapping[str, Any]) -> None:
        """Add or replace entries; an entry that cannot run is logged by name and skipped."""
        self._catalog.update(dict_)

    def _added(self, entry: Entry, now: int) -> None:
        """A new or changed entry: as leader, anchor it in the store (DESIGN.md §10)."""
        if self._lease.leader:
            self._anchor(entry, now)

    def add(self, **kwargs: Any) -> ScheduleEntry:
        name = kwargs.pop("name")
        kwargs.pop("app", None)
        self.update_from_dict({name: kwargs})
        if name in self.broken:
            raise EntryError(f"entry {name!r} cannot run; see the log")
        return self.entries[name]

    def get_schedule(self) -> LiveSchedule:  # type: ignore[override]  # a mapping, as Celery's
        """The entries, live: what is written into it is scheduled, as in Celery."""
        return LiveSchedule(self)

    def set_schedule(self, schedule: dict[str, ScheduleEntry]) -> None:
        self.merge_inplace(schedule)

    schedule = property(get_schedule, set_schedule)

    def _open_store(self) -> None:
        try:
            store = open_store(
                self.settings.store_url,
                prefix=self.settings.key_prefix,
                **self.settings.store_options,
            )
            # Every store call runs where a stop need not wait for it (see ``background``).
            self._store = cast(
                "Store", Guarded(store, self._store_io, self._gave_up, StoreUnavailable)
            )
        except StoreConfigError as exc:
            raise ConfigurationExit(exc) from None
        except Exception as exc:
            self._lease.failed(exc, time.monotonic())

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
        lease = self._lease
        if self._stop.requested:
            return 0.0
        if self._shared.changed:
            apply_changes(self, self._shared.changed)
        # While the store does not answer, only the lease's backed-off calls try it.
        if self._store is not None and lease.answering and time.monotonic() >= self._controls.due:
            self._poll_controls(self._store)
        # What is due goes before a renewal that falls on the same instant, while the lease
        # surely holds.
        if lease.leader and time.monotonic() < lease.held_until:
            self._dispatch_due()
        if time.monotonic() >= lease.due:
            self._maintain()
        if lease.leader and self._fanout.every_worker:
            self._take_census()
        if lease.leader and self._balance_shared != self._balancer.version:
            self._share_balance()
        if lease.leader:
            self._dispatch_due()  # what a new leader found due
        head = self._queue.head() if lease.leader else None
        if head is not None:
            self._make_ahead(head)  # reads the queue, takes nothing off it
        wake = min(lease.due, self._controls.due) if lease.answering else lease.due
        wait = wake - time.monotonic()
        if head is not None:
            # Woken at the slot itself (not at the millisecond before it), or before it to make
            # its messages.
            wake_ms = head if self._broker_outage is not None else self._ahead.wake_at(head)
            wait = min(wait, wake_ms / 1000 - self.clock())
        return max(0.0, min(wait, self.max_wait))

    def _dispatch_due(self) -> None:
        head = self._queue.head()
        if head is not None and head <= self.now_ms():
            self._dispatch(self.now_ms())

    def should_sync(self) -> bool:
        """Never: everything worth keeping is in the store already."""
        return False

    def _maintain(self) -> None:
        self.watch.entries(len(self.entries))
        if self._store is None:
            self._open_store()
            if self._store is None:
                return
        if self._lease.maintain(self._store, time.monotonic()):
            self._take_over(self._store)
        elif self._unserved and not self._lease.leader and self._lease.answering:
            self._unserved = not serve_from(self._store, self.entries)

    def _plan(self, entry: Entry, now: int, step: Callable[..., Any], *args: Any) -> Any:
        """Run one planning step of ``entry``. A schedule that cannot say its next slot is asked
        again later, as Celery's own scheduler does; logged with its traceback the first time,
        in one line afterwards, and given up on (one line) once it has run out or was refused
        as too slow."""
        try:
            return step(*args)
        except (ScheduleEnded, ScheduleTooSlow) as exc:
            self._give_up_on(entry, exc)
        except Exception as exc:
            first = entry.name not in self._unplanned
            self._unplanned.add(entry.name)
            logger.log(
                logging.ERROR if first else logging.WARNING,
                "beat: cannot compute the next slot of entry %r (%s: %s); trying again in %ss",
                entry.name,
                type(exc).__name__,
                exc,
                self.max_wait,
                exc_info=first,
            )
            entry.slot = entry.pending = None
        finally:
            if entry.missed is not None:
                self._report_missed(entry, now)
        return False

    def _report_missed(self, entry: Entry, now: int) -> None:
        """Tell the history and the metrics of the slots a catch-up just left out."""
        missed = entry.missed
        if missed is not None:
            entry.missed = None
            self.watch.missed(entry.name, missed[0], missed[1], missed[2], now)

    def _skipped(self, name: str, slot: int, holder: str) -> None:
        self.watch.skipped(name, slot, "overlap", self.now_ms(), holder)

    def _give_up_on(self, entry: Entry, why: Exception) -> None:
        level = logging.INFO if isinstance(why, EntryFinished) else logging.ERROR
        logger.log(level, "beat: entry %r has no more slots to send: %s", entry.name, why)
        entry.active = False
        entry.slot = entry.pending = None

    def _due_at(self, entry: Entry, now: int) -> int:
        """When the entry is next due: its slot, or a retry for one that could not plan."""
        slot = entry.slot
        return now + int(self.max_wait * 1000) if slot is None else slot

    def _requeue(self, entry: Entry, now: int) -> None:
        self._queue.push(entry, self._due_at(entry, now))

    def _due(self, now: int) -> list[Entry]:
        """Pop the entries whose slot is due (up to BATCH), planning any that need it."""
        queue = self._queue
        batch: list[Entry] = []
        while len(batch) < BATCH and (head := queue.head()) is not None and head <= now:
            entry = queue.pop()
            if entry is None or not entry.active:
                continue
            if self._controls.paused and self._paused(entry):
                continue
            if entry.max_runs is not None and entry.total_run_count >= entry.max_runs:
                self._give_up_on(entry, EntryFinished(f"it ran {entry.max_runs} times (max_runs)"))
                continue
            if entry.slot is None:
                self._plan(entry, now, entry.start, None, now)
            elif self._plan(entry, now, entry.ready, now):
                batch.append(entry)
                continue
            self._requeue(entry, now)
        return batch

    def _dispatch(self, now: int) -> None:
        """Claim every due slot (up to BATCH) in one store call; publish only what was claimed;
        give back, in one more call, what could not go out."""
        batch = self._due(now)
        if not batch:
            return
        store = self._store
        assert store is not None
        wanted = {entry.name: (cast(int, entry.slot), entry.fingerprint) for entry in batch}
        guards = {entry.name: run_guard(entry, cast(int, entry.slot)) for entry in batch}
        runs = {name: guard for name, guard in guards.items() if guard is not None}
        try:
            claimed = store.claim(self.token, wanted, runs, history=self.watch.outbox.drain())
        except Exception as exc:
            # The claim may have been made and its reply lost: remember the slots, so that this
            # beat, leading again, sends them (DESIGN.md §10).
            self._owed.update((name, slot) for name, (slot, _) in wanted.items())
            for entry in batch:
                self._requeue(entry, now)
            logger.warning(
                "beat: the claim of %d slot(s) was not confirmed (%s: %s); if the store made it, "
                "this beat sends them once it confirms the claim as leader",
                len(wanted),
                type(exc).__name__,
                exc,
            )
            self._lease.failed(exc, time.monotonic())
            return
        mine: list[tuple[Entry, int]] = []
        for entry in batch:
            slot = cast(int, entry.slot)
            verdict = self._overlaps.verdict(entry, slot, claimed)
            if verdict is Verdict.SEND:
                mine.append((entry, slot))
            elif verdict is Verdict.WAIT:
                self._queue.push(entry, now + WAIT_POLL_MS)
            else:
                self._plan(entry, now, entry.advance, slot, now)
                self._requeue(entry, now)
        self._owed.update((entry.name, slot) for entry, slot in mine)
        if mine:
            self._settle(store, self._publish_batch(mine), now)
        if len(claimed) < len(batch):
            self._lease.due = 0.0
            self._maintain()

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
        if self._http is not None:
            self._http.close()
        store = self._store
        if store is not None:
            history = self.watch.outbox.drain()
            try:
                store.record(history)
            except Exception:
                logger.debug("beat: %d history record(s) not written", len(history), exc_info=True)
            self._lease.release(store)
            try:
                store.close()
            except Exception:
                logger.debug("beat: closing the store failed", exc_info=True)
        self._stop.uninstall()
        try:
            self._broker_io.call(super().close, give_up=self._gave_up)
        except Abandoned:
            logger.info("beat: the broker did not answer the goodbye; leaving its connection")
        self._broker_io.close()
        self._store_io.close()

    def status(self) -> dict[str, Any]:
        """This beat as /status shows it: read from the HTTP thread, so only plain values."""
        lease = self._lease
        ready, why = self.watch.ready()
        return {
            "token": self.token,
            "role": "leader" if lease.leader else "standby",
            "leader": self.watch.holder,
            "lease_left_s": round(max(0.0, lease.held_until - time.monotonic()), 3)
            if lease.leader
            else None,
            "entries": len(self.entries),
            "broken_entries": sorted(self.broken.copy()),  # copied at once: read off-thread
            "store": {
                "url": mask_url(self.settings.store_url),
                "prefix": self.settings.key_prefix,
                "ready": ready,
                "detail": why,
            },
            "broker_outage": self._broker_outage,
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
