"""The Planner: the slot queue, and each entry's next slot as the leader goes through it.

Entries wait in the slot queue keyed by their next slot (UTC epoch ms), so an idle tick costs the
same at ten entries or a hundred thousand. Planning an entry asks its schedule for its next slot
(or, as a new leader, its first from its fence); a schedule that cannot say is asked again later,
one that ran out is given up on. ``due`` takes the entries due at an instant off the queue for the
``Dispatcher`` to claim (docs/design.md §5).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.beat.oneshots import DoneOnce
from celery_hashbeat.beat.slotqueue import SlotQueue
from celery_hashbeat.entries.errors import EntryFinished, ScheduleEnded, ScheduleTooSlow

if TYPE_CHECKING:
    from celery_hashbeat.beat.parking import Parking
    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.observe.watch import Watch
    from celery_hashbeat.store.values import Fence

logger = SCHEDULER

#: The most slots claimed in one store call; a larger backlog is drained over consecutive ticks.
BATCH = 1000


class Planner:
    """Owns the slot queue, and the entries that could not plan or ran out."""

    def __init__(
        self,
        entries: Mapping[str, Entry],
        watch: Watch,
        parking: Parking,
        retry_ms: Callable[[], int],
    ) -> None:
        self._entries = entries
        self._watch = watch
        self._parking = parking
        #: How soon an entry whose schedule could not say its next slot is asked again (ms).
        self._retry_ms = retry_ms
        #: Made before the schedule is built, so frozen with it (see ``slotqueue``).
        self.queue = SlotQueue(entries)
        #: Entries whose schedule failed to plan, so the traceback is logged once only.
        self._unplanned: set[str] = set()
        #: One-shots that ran out of slots, until the store drops them (docs/design.md §21).
        self.done = DoneOnce()

    def plan(self, entry: Entry, now: int, step: Callable[..., Any], *args: Any) -> Any:
        """Run one planning step of ``entry``. A schedule that cannot say its next slot is asked
        again later, as Celery's own scheduler does; logged with its traceback the first time,
        in one line afterwards, and given up on (one line) once it has run out or was refused
        as too slow."""
        try:
            return step(*args)
        except (ScheduleEnded, ScheduleTooSlow) as exc:
            self.give_up_on(entry, exc)
        except Exception as exc:
            first = entry.name not in self._unplanned
            self._unplanned.add(entry.name)
            logger.log(
                logging.ERROR if first else logging.WARNING,
                "beat: cannot compute the next slot of entry %r (%s: %s); trying again in %ss",
                entry.name,
                type(exc).__name__,
                exc,
                self._retry_ms() / 1000,
                exc_info=first,
            )
            entry.slot = entry.pending = None
        finally:
            if entry.missed is not None:
                self._report_missed(entry, now)
        return False

    def requeue(self, entry: Entry, now: int) -> None:
        self.queue.push(entry, self._due_at(entry, now))

    def resume(self, entry: Entry, fence: Fence | None, now: int) -> None:
        """Plan ``entry`` from its fence (or its floor, if later)."""
        entry.start(self._parking.floor_of(entry, None if fence is None else fence.slot), now)

    def refill(self, fences: Mapping[str, Fence], now: int) -> None:
        """As a new leader: plan every entry from its fence."""
        self.queue.refill(self._resumed(fences, now))

    def _resumed(self, fences: Mapping[str, Fence], now: int) -> Iterator[tuple[Entry, int]]:
        plan, resume, due_at = self.plan, self.resume, self._due_at
        for name, entry in self._entries.items():
            plan(entry, now, resume, entry, fences.get(name), now)
            yield entry, due_at(entry, now)

    def _due_at(self, entry: Entry, now: int) -> int:
        """When the entry is next due: its slot, or a retry for one that could not plan."""
        slot = entry.slot
        return now + self._retry_ms() if slot is None else slot

    def _report_missed(self, entry: Entry, now: int) -> None:
        """Tell the history and the metrics of the slots a catch-up just left out."""
        missed = entry.missed
        if missed is not None:
            entry.missed = None
            self._watch.missed(entry.name, missed[0], missed[1], missed[2], now)

    def give_up_on(self, entry: Entry, why: Exception) -> None:
        level = logging.INFO if isinstance(why, EntryFinished) else logging.ERROR
        logger.log(level, "beat: entry %r has no more slots to send: %s", entry.name, why)
        self.done.note(entry)
        entry.active = False
        entry.slot = entry.pending = None

    def due(self, now: int) -> list[Entry]:
        """Pop the entries whose slot is due (up to BATCH), planning any that need it."""
        queue = self.queue
        batch: list[Entry] = []
        while len(batch) < BATCH and (head := queue.head()) is not None and head <= now:
            entry = queue.pop()
            if entry is None or not entry.active:
                continue
            if self._parking.holds(entry):
                continue
            if entry.max_runs is not None and entry.total_run_count >= entry.max_runs:
                self.give_up_on(entry, EntryFinished(f"it ran {entry.max_runs} times (max_runs)"))
                continue
            if entry.slot is None:
                self.plan(entry, now, entry.start, None, now)
            elif self.plan(entry, now, entry.ready, now):
                batch.append(entry)
                continue
            self.requeue(entry, now)
        return batch
