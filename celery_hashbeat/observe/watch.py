"""What the beat tells about itself (docs/design.md §14): history, metrics and health, in one place.

The scheduler calls a Watch at the points where something happens (a slot sent, skipped or
missed, a store call failed or answered, the lease changed hands, a tick began); the Watch turns
each into a history record (history.py), metric updates (metrics.py, only when HTTP is served)
and the state /livez, /readyz and /status report (http.py). Every call is a few attribute writes
and, at most, one JSON encoding: nothing here touches the network.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from celery_hashbeat.observe.history import (
    DROPPED,
    MISSED,
    SENT,
    SKIPPED,
    TRIGGER,
    Outbox,
    Record,
    sent_text,
)
from celery_hashbeat.observe.metrics import Metrics

#: /livez fails once the tick loop has not turned for this long, at least (seconds).
LIVENESS_FLOOR = 30.0


class Watch:
    """One beat's history outbox, metrics and health state."""

    def __init__(
        self,
        token: str,
        metrics: Metrics | None,
        max_wait: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.token = token
        self._token_json = json.dumps(token)
        self.metrics = metrics
        self.outbox = Outbox()
        self.monotonic = monotonic
        #: The tick loop is stuck once it has not turned for this long (seconds).
        self.stuck_after = LIVENESS_FLOOR
        self.wait_at_most(max_wait)
        self.last_tick = monotonic()
        #: Why the store is not ready, or None while it answers.
        self.store_problem: str | None = "the store has not been asked yet"
        self.leader = False
        #: The lease holder as this beat last learnt it (its own token while it leads).
        self.holder: str | None = None
        #: Why this beat's way to the broker is stuck (it gave up the lease over it), or None.
        self.broker_stuck: str | None = None
        #: Entry -> its max_lateness (ms), for the entries that set one (beat/promises.py).
        self.late_after_ms: dict[str, int] = {}

    # The tick loop

    def wait_at_most(self, max_wait: float) -> None:
        """The longest sleep between ticks (``beat_max_loop_interval``)."""
        self.stuck_after = max(3 * max_wait, LIVENESS_FLOOR)

    def ticked(self) -> None:
        self.last_tick = self.monotonic()

    def since_tick(self) -> float:
        return self.monotonic() - self.last_tick

    def live(self) -> tuple[bool, str]:
        """Whether the tick loop turns and the broker answers, and a line saying so."""
        stuck = self.broker_stuck
        if stuck is not None:
            return False, (
                f"the way to the broker is stuck ({stuck}): this beat gave up the lease and "
                "leads again once the broker answers; restart it if this lasts"
            )
        age = self.since_tick()
        if age > self.stuck_after:
            return False, (
                f"the tick loop has not turned for {age:.0f}s (limit {self.stuck_after:.0f}s): "
                "the beat is stuck; restart it"
            )
        return True, f"the tick loop turned {age:.1f}s ago"

    def ready(self) -> tuple[bool, str]:
        """Whether the store answers, and a line saying so (or why not)."""
        problem = self.store_problem
        if problem is not None:
            return False, f"the store is not answering: {problem}"
        return True, "the store answers"

    # The store and the lease

    def store_answered(self) -> None:
        self.store_problem = None

    def store_failed(self, exc: BaseException) -> None:
        self.store_problem = str(exc) or type(exc).__name__
        if self.metrics is not None:
            self.metrics.store_errors.inc()

    def leading(self, leader: bool, holder: str | None) -> None:
        self.leader = leader
        self.holder = holder
        if self.metrics is not None:
            self.metrics.set_leader(leader)

    def entries(self, count: int) -> None:
        if self.metrics is not None:
            self.metrics.entries.set(count)

    # Slots

    def sent(self, entry: str, slot: int, task_id: str, published_ms: int) -> None:
        lateness = published_ms - slot
        self.outbox.add_text(
            entry, sent_text(slot, published_ms, self._token_json, task_id, lateness)
        )
        if self.metrics is not None:
            self.metrics.count_sent(entry, lateness / 1000)
            late_after = self.late_after_ms.get(entry) if self.late_after_ms else None
            if late_after is not None and lateness > late_after:
                self.metrics.count_late(entry)

    def backfilled(self, entry: str, slot: int, task_id: str, published_ms: int, ask: str) -> None:
        """A past slot sent by the backfill ``ask`` (beat/backfill.py): in the history, saying
        so, and out of the lateness metrics, since it was asked for late on purpose."""
        reason = f"backfill {ask}"
        self.outbox.add(entry, Record(SENT, slot, published_ms, self.token, task_id, reason))

    def triggered(
        self, entry: str, task_id: str, asked_ms: int, published_ms: int, forced: bool = False
    ) -> None:
        """A run asked for by an operator went out (its lateness counts from the asking);
        ``forced``: past the entry's overlap guard, on the operator's --force."""
        lateness = published_ms - asked_ms
        reason = "forced past the overlap guard" if forced else ""
        self.outbox.add(
            entry,
            Record(TRIGGER, None, published_ms, self.token, task_id, reason, lateness_ms=lateness),
        )

    def trigger_skipped(self, entry: str, task_id: str, holder: str, now_ms: int) -> None:
        """A trigger was not sent: the run of task ``holder`` holds the entry's run lease and
        the entry's overlap is ``skip``."""
        reason = f"trigger while task {holder} runs (overlap skip)"
        self.outbox.add(entry, Record(SKIPPED, None, now_ms, self.token, task_id, reason))
        if self.metrics is not None:
            self.metrics.count_skipped(entry, "overlap")

    def skipped(self, entry: str, slot: int, reason: str, now_ms: int, holder: str = "") -> None:
        """``slot`` was not sent; ``holder`` is the task whose run it would have overlapped."""
        self.outbox.add(entry, Record(SKIPPED, slot, now_ms, self.token, holder, reason))
        if self.metrics is not None:
            self.metrics.count_skipped(entry, reason)

    def missed(self, entry: str, slot: int, count: int, reason: str, now_ms: int) -> None:
        """``count`` slots up to ``slot`` were left out by the catch-up policy."""
        self.outbox.add(entry, Record(MISSED, slot, now_ms, self.token, reason=reason, count=count))
        if self.metrics is not None:
            self.metrics.count_missed(entry, count)

    def dropped(self, entry: str, slot: int, reason: str, now_ms: int) -> None:
        """``slot`` can never be sent (``reason`` says why); it was not, and is not retried."""
        self.outbox.add(entry, Record(DROPPED, slot, now_ms, self.token, reason=reason))
        self.publish_failed()

    def publish_failed(self) -> None:
        if self.metrics is not None:
            self.metrics.publish_errors.inc()
