"""The beat Scheduler: ``celery -A proj beat -S celery_hashbeat.Scheduler`` (or ``-S hashbeat``).

Entries wait in a heap keyed by their next slot (UTC epoch ms), so an idle tick costs the same at
ten entries or a hundred thousand, and returns exactly the time until the next slot or the next
lease call. Only the lease holder enqueues; it claims every slot due in a tick with one store call
and publishes only what it claimed (DESIGN.md §5), with a task id derived from (entry, slot).
"""

from __future__ import annotations

import gc
import time
import uuid
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any, cast

from celery import beat
from celery.beat import BeatLazyFunc
from celery.utils.log import get_logger
from kombu.utils.url import maybe_sanitize_url

from celery_hashbeat.entries import Entry, EntryError, SharedSlots, build_entry
from celery_hashbeat.lease import Lease, new_token
from celery_hashbeat.settings import Settings
from celery_hashbeat.slots import to_datetime
from celery_hashbeat.stopping import stop_signals_held
from celery_hashbeat.store import open_store
from celery_hashbeat.store.base import StoreConfigError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from celery import Celery
    from celery.beat import ScheduleEntry

    from celery_hashbeat.store.base import Store

logger = get_logger(__name__)

#: Task ids are uuid5(NAMESPACE, "<entry>|<slot ms>"): fixed forever, so that downstream code can
#: recognise a slot's task whichever beat sent it. Changing it breaks deduplication across releases.
NAMESPACE = uuid.UUID("46f53fda-c94e-4ed5-bf27-9d8b09c0a1e3")

#: The most slots claimed in one store call; a larger backlog is drained over consecutive ticks.
BATCH = 1000

#: After a failed publish (its claim given back), the slot is retried this much later (ms).
PUBLISH_RETRY_MS = 1000


def slot_task_id(entry: str, slot: int) -> str:
    """The task id of an entry's slot, the same from every beat."""
    return str(uuid.uuid5(NAMESPACE, f"{entry}|{slot}"))


def slot_iso(slot: int) -> str:
    """A slot as ISO 8601 in UTC, to the millisecond, for the ``hashbeat_slot`` header."""
    return to_datetime(slot).isoformat(timespec="milliseconds")


class Scheduler(beat.Scheduler):
    """A highly available beat scheduler for Celery, with hashed schedules and fenced enqueues."""

    def __init__(self, app: Celery, *args: Any, **kwargs: Any) -> None:
        self.settings = Settings.from_conf(app.conf)
        self.token = new_token()
        #: Wall-clock seconds since the epoch; slots are computed from it.
        self.clock: Callable[[], float] = time.time
        self.entries: dict[str, Entry] = {}
        #: Names of configured entries that could not run: their fences are kept.
        self.broken: set[str] = set()
        self._shared = SharedSlots(app)
        self._queue: list[tuple[int, int, Entry]] = []
        self._store: Store | None = None
        self._lease = Lease(self.settings, self.token)
        self._ticking = False
        self._close_requested = False
        self._closed = False
        super().__init__(app, *args, **kwargs)

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
        self.merge_inplace(self.app.conf.beat_schedule)
        self.install_default_entries(self.entries)
        # The schedule lives as long as the process: keeping it out of the cyclic collector's
        # full passes spares the beat pauses of tens of milliseconds at 100,000 entries.
        gc.freeze()
        if self._store is None:
            self._open_store()

    def merge_inplace(self, b: Mapping[str, Any]) -> None:
        for name in [name for name in self.entries if name not in b]:
            self.entries.pop(name).active = False
        self.broken.intersection_update(b)
        self.update_from_dict(b)

    def update_from_dict(self, dict_: Mapping[str, Any]) -> None:
        """Add or replace entries; an entry that cannot run is logged by name and skipped."""
        now = self.now_ms()
        for name, definition in dict_.items():
            try:
                entry = build_entry(name, definition, self.settings, self._shared, now)
            except EntryError as exc:
                logger.error("beat: skipping %s", exc)
                self.broken.add(name)
                old = self.entries.pop(name, None)
                if old is not None:
                    old.active = False
                continue
            self.broken.discard(name)
            current = self.entries.get(name)
            if current is not None:
                if current.same_as(entry):
                    continue
                current.active = False
            self.entries[name] = entry
            if self._lease.leader:
                self._plan(entry, now, entry.start, None, now)
                heappush(self._queue, self._item(entry, now))

    def add(self, **kwargs: Any) -> ScheduleEntry:
        name = kwargs.pop("name")
        kwargs.pop("app", None)
        self.update_from_dict({name: kwargs})
        if name in self.broken:
            raise EntryError(f"entry {name!r} cannot run; see the log")
        return self.entries[name]

    def get_schedule(self) -> dict[str, ScheduleEntry]:
        return dict(self.entries)

    def set_schedule(self, schedule: dict[str, ScheduleEntry]) -> None:
        self.merge_inplace(schedule)

    schedule = property(get_schedule, set_schedule)

    def _open_store(self) -> None:
        try:
            self._store = open_store(
                self.settings.store_url,
                prefix=self.settings.key_prefix,
                **self.settings.store_options,
            )
        except StoreConfigError:
            raise
        except Exception as exc:
            self._lease.failed(exc, time.monotonic())

    # Ticking ----------------------------------------------------------------------------------

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """One pass: keep the lease, enqueue what is due, and say how long to sleep."""
        self._ticking = True
        try:
            return self._tick()
        finally:
            self._ticking = False
            if self._close_requested:
                self.close()

    def _tick(self) -> float:
        lease = self._lease
        if time.monotonic() >= lease.due:
            self._maintain()
        queue = self._queue
        if lease.leader and queue and queue[0][0] <= self.now_ms():
            self._dispatch(self.now_ms())
        wait = lease.due - time.monotonic()
        if lease.leader and queue:
            wait = min(wait, (queue[0][0] - self.now_ms()) / 1000)
        return max(0.0, min(wait, self.max_wait))

    def should_sync(self) -> bool:
        """Never: everything worth keeping is in the store already."""
        return False

    def _maintain(self) -> None:
        if self._store is None:
            self._open_store()
            if self._store is None:
                return
        if self._lease.maintain(self._store, time.monotonic()):
            self._take_over(self._store)

    def _take_over(self, store: Store) -> None:
        """As the new leader, read every entry's fence and catch up from it (DESIGN.md §5)."""
        try:
            fences = store.last_slots()
            gone = [name for name in fences if name not in self.entries and name not in self.broken]
            if gone:
                store.forget(gone)
        except Exception as exc:
            self._lease.failed(exc, time.monotonic())
            return
        now = self.now_ms()
        for name, entry in self.entries.items():
            self._plan(entry, now, entry.start, fences.get(name), now)
        queue = [self._item(entry, now) for entry in self.entries.values()]
        heapify(queue)
        self._queue = queue
        logger.debug("beat: leading %d entries (%d forgotten)", len(queue), len(gone))

    def _plan(self, entry: Entry, now: int, step: Callable[..., Any], *args: Any) -> Any:
        """Run one planning step of ``entry``. A schedule that cannot say its next slot is logged
        and asked again later, as Celery's own scheduler does."""
        try:
            return step(*args)
        except Exception:
            logger.exception(
                "beat: cannot compute the next slot of entry %r; trying again in %ss",
                entry.name,
                self.max_wait,
            )
            entry.slot = entry.pending = None
            return False

    def _item(self, entry: Entry, now: int) -> tuple[int, int, Entry]:
        """The entry's place in the queue: its slot, or a retry for one that could not plan."""
        slot = entry.slot
        due = now + int(self.max_wait * 1000) if slot is None else slot
        return (due, entry.order, entry)

    def _dispatch(self, now: int) -> None:
        """Claim every due slot (up to BATCH) in one store call; publish only what was claimed."""
        queue = self._queue
        batch: list[Entry] = []
        wanted: dict[str, int] = {}
        while queue and queue[0][0] <= now and len(batch) < BATCH:
            entry = heappop(queue)[2]
            if not entry.active:
                continue
            if entry.slot is None:
                self._plan(entry, now, entry.start, None, now)
            elif self._plan(entry, now, entry.ready, now):
                batch.append(entry)
                wanted[entry.name] = entry.slot
                continue
            heappush(queue, self._item(entry, now))
        if not batch:
            return
        store = self._store
        assert store is not None
        claimed: dict[str, int | None] = {}
        started = 0
        try:
            try:
                with stop_signals_held():
                    claimed = store.claim(self.token, wanted)
            except Exception as exc:
                self._lease.failed(exc, time.monotonic())
                return
            for entry in batch:
                started += 1
                slot = wanted[entry.name]
                if entry.name in claimed and not self._publish(entry, slot):
                    self._give_back(store, entry, slot, claimed[entry.name])
                    heappush(queue, (now + PUBLISH_RETRY_MS, entry.order, entry))
                    continue
                self._plan(entry, now, entry.advance, slot, now)
                heappush(queue, self._item(entry, now))
        except BaseException:
            # A stop (SystemExit from Celery's SIGTERM handler) lands between publishes: the
            # claims whose message did not go out are given back for the next leader to send.
            for entry in batch[max(started - 1, 0) :]:
                slot = wanted[entry.name]
                if entry.name in claimed and entry.last_slot != slot:
                    self._give_back(store, entry, slot, claimed[entry.name])
            raise
        if len(claimed) < len(batch):
            self._lease.due = 0.0
            self._maintain()

    def _give_back(self, store: Store, entry: Entry, slot: int, previous: int | None) -> None:
        try:
            store.unclaim(self.token, entry.name, slot, previous)
        except Exception as exc:
            self._lease.failed(exc, time.monotonic())

    # Publishing -------------------------------------------------------------------------------

    def _publish(self, entry: Entry, slot: int) -> bool:
        when = slot_iso(slot)
        logger.info("Scheduler: Sending due task %s (%s) slot %s", entry.name, entry.task, when)
        try:
            with stop_signals_held():
                self.send(entry, slot_task_id(entry.name, slot), when)
                entry.last_slot = slot
        except Exception as exc:
            logger.error(
                "Message Error: could not send %s for slot %s (%s); retrying",
                entry.name,
                when,
                exc,
                exc_info=True,
            )
            return False
        entry.total_run_count += 1
        return True

    def send(self, entry: Entry, task_id: str, when: str) -> Any:
        """Publish one slot of ``entry`` with its options, as Celery's scheduler would, plus the
        slot's task id and the hashbeat headers."""
        options = dict(entry.options)
        headers = {
            **(options.pop("headers", None) or {}),
            "celery_beat_task": True,
            "hashbeat_entry": entry.name,
            "hashbeat_slot": when,
        }
        options["task_id"] = task_id
        args, kwargs = entry.args, entry.kwargs
        if entry.lazy:
            args = tuple(arg() if isinstance(arg, BeatLazyFunc) else arg for arg in args)
            kwargs = {k: v() if isinstance(v, BeatLazyFunc) else v for k, v in kwargs.items()}
        task = self.app.tasks.get(entry.task)
        if task is not None:
            return task.apply_async(
                args, kwargs, producer=self.producer, headers=headers, **options
            )
        return self.app.send_task(
            entry.task, args, kwargs, producer=self.producer, headers=headers, **options
        )

    # Shutting down ----------------------------------------------------------------------------

    def close(self) -> None:
        """Release the lease and the store. Called from a signal handler mid-tick, it waits for
        the tick to unwind, so a store call is never interrupted by another."""
        if self._closed:
            return
        if self._ticking:
            self._close_requested = True
            return
        self._closed = True
        store = self._store
        if store is not None:
            self._lease.release(store)
            try:
                store.close()
            except Exception:
                logger.debug("beat: closing the store failed", exc_info=True)
        super().close()

    @property
    def info(self) -> str:
        settings = self.settings
        return (
            f"    . store -> {maybe_sanitize_url(settings.store_url)} "
            f"(prefix {settings.key_prefix})\n"
            f"    . lease -> {settings.lease_ttl:g}s, renewed every {settings.renew_interval:g}s; "
            f"catch-up {settings.catch_up}"
        )
