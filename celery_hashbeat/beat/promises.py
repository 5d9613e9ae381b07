"""The leader keeps the entries' promises (docs/design.md §19): it learns how their runs end
from the history the workers write (worker/outcomes.py), counts the failures in a row since the
last success, sets the promise metrics and pauses an entry whose run of failures reaches its
``pause_after_failures``, with a reason that says so (recorded in the audit trail as the leader's
change).

The cheapest correct way: only entries that make a promise are looked at, every CHECK_S seconds,
one history read each, of the newest records only; nothing is added to the workers' path or to
the claim. Outcomes from before the entry's floor (its last add, update or resume) do not count,
so a resumed entry is not paused again for the failures that paused it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.control.audit import Change, Who, as_data, record
from celery_hashbeat.control.pause_and_trigger import Pause, encode_pause
from celery_hashbeat.observe.history import FAILED, SUCCEEDED, Record, newest_first
from celery_hashbeat.store.base import HISTORY_CAP
from celery_hashbeat.store.controls import PAUSE

if TYPE_CHECKING:
    from celery_hashbeat.beat.storecalls import StoreCalls
    from celery_hashbeat.control.polling import ControlState
    from celery_hashbeat.entries.catalog import Catalog
    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.observe.watch import Watch

logger = SCHEDULER

#: How often the leader reads the outcomes of the entries with promises (seconds).
CHECK_S = 2.0


def tally(records: list[Record], floor_ms: int) -> tuple[int, int | None]:
    """(failures in a row, the last success in epoch ms or None) from records newest first,
    counting nothing from before ``floor_ms``."""
    failures, success = 0, None
    for found in records:
        if found.at < floor_ms:
            break
        if found.outcome == SUCCEEDED:
            success = found.at
            break
        if found.outcome == FAILED:
            failures += 1
    if success is None:
        success = next((r.at for r in records if r.outcome == SUCCEEDED), None)
    return failures, success


def interval_s(catalog: Catalog, name: str, now_ms: int) -> float | None:
    """Seconds between entry ``name``'s next two slots after now; None if it cannot say."""
    try:
        source = catalog.entries[name].source
        first = source.next_after(now_ms)
        return (source.next_after(first) - first) / 1000
    except Exception:  # no more slots, or a schedule that cannot say now
        return None


class PromiseKeeper:
    """The leader's side of the promises; told each leading tick (``keep``)."""

    def __init__(
        self,
        token: str,
        calls: StoreCalls,
        catalog: Catalog,
        controls: ControlState,
        watch: Watch,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.token = token
        self.calls = calls
        self.catalog = catalog
        self.controls = controls
        self.watch = watch
        self.monotonic = monotonic
        self._due = 0.0
        #: The entries built with promises (``note``), so that a check looks at those only,
        #: not at every entry of a schedule of 100,000.
        self._noted: dict[str, Entry] = {}

    def note(self, entry: Entry) -> None:
        """Told of every entry the catalog builds; keeps those that promise something."""
        if entry.promises is not None:
            self._noted[entry.name] = entry
        else:
            self._noted.pop(entry.name, None)

    def keep(self, now_ms: int) -> None:
        """Every CHECK_S: read the promised entries' outcomes, set the metrics, pause those
        whose failures reached their limit. A store that fails is the lease's concern: this
        waits for the next check."""
        now = self.monotonic()
        if now < self._due:
            return
        self._due = now + CHECK_S
        entries = self.catalog.entries
        for name in [n for n, e in self._noted.items() if entries.get(n) is not e]:
            del self._noted[name]  # taken out, or replaced by an entry without promises
        promised = {n: e.promises for n, e in self._noted.items() if e.promises is not None}
        self.watch.late_after_ms = {
            name: p.max_lateness_ms for name, p in promised.items() if p.max_lateness_ms
        }
        outcomes: dict[str, tuple[int, float | None]] = {}
        shown: dict[str, tuple[int | None, float | None]] = {}
        for name, promises in promised.items():
            shown[name] = (promises.alert_after_failures, interval_s(self.catalog, name, now_ms))
            watched = promises.failures_watched
            if watched is None:
                continue
            try:
                texts = self.calls.call(self.calls.store.history, name, HISTORY_CAP)
            except Exception:
                return
            failures, success = tally(newest_first(texts), self._floor(name))
            outcomes[name] = (failures, None if success is None else success / 1000)
            limit = promises.pause_after_failures
            if limit and failures >= limit:
                self._pause(name, failures, now_ms)
        if self.watch.metrics is not None:
            self.watch.metrics.set_outcomes(outcomes)
            self.watch.metrics.set_promises(shown)

    def _floor(self, name: str) -> int:
        floors = self.controls.floors
        parent = self.catalog.fanout.parent_of(name)
        return max(floors.get(name, 0), floors.get(parent or "", 0))

    def _pause(self, name: str, failures: int, now_ms: int) -> None:
        """Pause the entry (a copy's: the entry it copies), unless a pause holds it already."""
        if self.catalog.held(name, self.controls.paused):
            return
        target = self.catalog.fanout.parent_of(name) or name
        reason = (
            f"paused by the leader: {failures} failures in a row of {name!r} reached its "
            f"pause_after_failures; fix the task, then `hashbeat resume {target}`"
        )
        pause = encode_pause(Pause(True, reason, now_ms))
        store = self.calls.store
        before = self.calls.call(store.controls_of, target)[1]
        self.calls.call(store.edit, target, {PAUSE: pause})
        who = Who("hashbeat", socket.gethostname(), f"leader {self.token}")
        change = Change("pause", target, who, as_data(before), as_data(pause), reason)
        self.calls.call(record, store, change)
        # The beats' next poll of the controls reads the pause and parks the entry.
        logger.warning("beat: entry %r: %s", target, reason)
