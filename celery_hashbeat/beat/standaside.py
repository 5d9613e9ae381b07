"""Standing aside: a leader whose broker takes nothing gives the lease to a beat whose broker may.

Every wait on the broker is bounded (``publish.publisher``), so a leader whose broker hangs or
refuses gives its claimed slots back and retries them every second. If that goes on for longer
than a publish may wait (max(lease TTL, 5 s)), holding the lease only keeps a standby with a
working way to the broker from sending: the leader gives the lease up, and stands aside, trying
a new connection every second and keeping off the lease, until the broker answers it. Meanwhile
``/livez`` says its way to the broker is stuck (docs/design.md §10). Asked once per tick.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.publish.publisher import PUBLISH_RETRY_MS

if TYPE_CHECKING:
    from celery_hashbeat.beat.handover import Owed
    from celery_hashbeat.beat.lease import Lease
    from celery_hashbeat.beat.storecalls import StoreCalls
    from celery_hashbeat.observe.watch import Watch
    from celery_hashbeat.publish.publisher import Publisher

logger = SCHEDULER

#: How often a beat standing aside tries its broker (seconds).
PROBE_EVERY_S = PUBLISH_RETRY_MS / 1000


class StandAside:
    """Whether this beat stands aside for its broker, and when it next tries it."""

    def __init__(
        self, lease: Lease, calls: StoreCalls, publisher: Publisher, watch: Watch, owed: Owed
    ) -> None:
        self._lease = lease
        #: What this beat claimed and could not send: handed over while it stands aside, as a
        #: standby's lease calls would (they are kept off meanwhile).
        self._owed = owed
        self._calls = calls
        self._publisher = publisher
        self._watch = watch
        #: When (monotonic s) the broker is next tried, while standing aside.
        self._probe_at = 0.0

    @property
    def aside(self) -> bool:
        return self._watch.broker_stuck is not None

    def tick(self) -> None:
        """Step down if leading and the broker has taken nothing for too long; while standing
        aside, try the broker when due and keep the lease's calls off until it answers."""
        if not self.aside:
            if self._lease.leader and self._publisher.stuck:
                self._step_down()
            return
        lease = self._lease
        if time.monotonic() >= self._probe_at:
            if self._publisher.probe():
                logger.info("beat: the broker answers again: competing for the lease")
                self._watch.broker_stuck = None
                lease.due_s = 0.0
                return
            self._probe_at = time.monotonic() + PROBE_EVERY_S
            self._owed.hand_over()
        lease.due_s = max(lease.due_s, self._probe_at)

    def _step_down(self) -> None:
        publisher = self._publisher
        since = publisher.failing_since
        waited = 0.0 if since is None else time.monotonic() - since
        why = f"no message has reached it for {waited:.0f}s"
        logger.warning(
            "beat: the broker is stuck (%s): giving up the lease so that a beat whose broker "
            "answers can lead; this beat tries the broker every %.0fs and competes for the "
            "lease again once it answers",
            why,
            PROBE_EVERY_S,
        )
        self._watch.broker_stuck = why
        publisher.drop_connection()  # the broker's answer to a new one is the test
        self._lease.release(self._calls)
        self._owed.hand_over()
        self._probe_at = time.monotonic() + PROBE_EVERY_S
        self._lease.due_s = self._probe_at
