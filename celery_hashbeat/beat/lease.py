"""Leadership (docs/design.md §5): at most one beat holds the lease and enqueues.

The lease is a state machine driven by the scheduler's ticks: a standby tries to acquire at least
once a second, the leader renews every renewal period and steps down the moment a renewal fails,
and an unreachable store makes any beat a standby that retries with backoff. Each change of state
is logged once, never once per tick.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from typing import TYPE_CHECKING

from celery_hashbeat._logs import LEASE
from celery_hashbeat._outage import Outage
from celery_hashbeat.store.errors import StoreAuthError, StoreError

if TYPE_CHECKING:
    from collections.abc import Callable

    from celery_hashbeat.beat.storecalls import StoreCalls
    from celery_hashbeat.observe.watch import Watch
    from celery_hashbeat.settings import Settings

logger = LEASE

LEADER = "leader"
STANDBY = "standby"

#: The longest pause between attempts while the store is unreachable.
BACKOFF_CAP = 5.0

#: How soon a leader cut off from the store tries again while its lease may still hold: it may
#: have claims whose replies were lost, and only it can recognise (and send) them.
RECLAIM_RETRY = 0.1


def new_token() -> str:
    """``hostname:pid:random``: says which process holds the lease, and is never reused."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"


class Lease:
    """One beat's side of the lease. ``due_s`` is when (monotonic seconds) it next needs a call."""

    def __init__(self, settings: Settings, token: str) -> None:
        self.token = token
        self.ttl_ms = settings.lease_ttl_ms
        self.renew_interval = settings.renew_interval
        self.standby_interval = min(1.0, settings.renew_interval)
        self.leader = False
        self.due_s = 0.0
        self._role: str | None = None
        self._heartbeat_due = 0.0
        self._outage = Outage(logger, "beat: the store answers again (after: %(cause)s)")
        self._backoff = self.standby_interval / 2
        #: Until when (monotonic) the lease may still be this beat's, as far as it knows.
        self.held_until = 0.0
        #: A digest of this beat's schedule, shown to the other beats through the heartbeat.
        self.schedule_digest = ""
        #: What this beat runs, written for ``hashbeat plan`` under the digest
        #: (control/running.py): made and recorded once per digest, at the first heartbeat
        #: that has it, not at start; None: nothing to record.
        self.schedule_text: Callable[[], str | None] | None = None
        self._recorded_digest = ""
        self._warned_digest: str | None = None
        #: Told whether the store answers and who leads; its outbox rides on each renewal.
        self.watch: Watch | None = None

    @property
    def answering(self) -> bool:
        """Whether the store answered the last lease call."""
        return self._outage.cause is None

    def maintain(self, calls: StoreCalls, now: float) -> bool:
        """Renew or acquire as the role asks. True when this call made this beat the leader."""
        try:
            return self._renew(calls, now) if self.leader else self._acquire(calls, now)
        except Exception as exc:
            self.failed(exc, now)
            return False

    def _renew(self, calls: StoreCalls, now: float) -> bool:
        history = self.watch.outbox.drain() if self.watch is not None else []
        if calls.call(calls.store.renew, self.token, self.ttl_ms, history=history):
            self.held_until = now + self.ttl_ms / 1000
            self._heartbeat(calls, LEADER, now)
            self._answered()
            self.due_s = now + self.renew_interval
            return False
        self.leader = False
        self.due_s = now + self.standby_interval
        self._became(STANDBY, calls, "lost the lease")
        return False

    def _acquire(self, calls: StoreCalls, now: float) -> bool:
        # Its own lease, taken back after an outage, is not extended by acquire: renew it at once.
        held = now < self.held_until
        taken = calls.call(calls.store.acquire, self.token, self.ttl_ms) and (
            not held or calls.call(calls.store.renew, self.token, self.ttl_ms)
        )
        if not taken:
            self._heartbeat(calls, STANDBY, now)
            self._answered()
            self.due_s = now + self.standby_interval
            self._became(STANDBY, calls, "standing by")
            return False
        self.held_until = now + self.ttl_ms / 1000
        self.leader = True
        self._heartbeat(calls, LEADER, now)
        self._answered()
        self.due_s = now + self.renew_interval
        if held:
            # The lease was this beat's all along (it cannot lapse before held_until): nobody
            # else led, so there is nothing to take over and nothing new to say.
            self._role = LEADER
            if self.watch is not None:
                self.watch.leading(True, self.token)
            return False
        self._became(LEADER, calls, "acquired the lease")
        return True

    def _heartbeat(self, calls: StoreCalls, role: str, now: float) -> None:
        if role == LEADER or now >= self._heartbeat_due:
            calls.call(calls.store.heartbeat, self.token, role, self.ttl_ms, self.schedule_digest)
            self._heartbeat_due = now + self.renew_interval
            digest = self.schedule_digest
            if self.schedule_text is not None and digest and digest != self._recorded_digest:
                text = self.schedule_text()
                if text is not None:
                    calls.call(calls.store.record_schedule, digest, text)
                self._recorded_digest = digest

    def _became(self, role: str, calls: StoreCalls, what: str) -> None:
        if role == self._role:
            return
        self._role = role
        if self.watch is not None and role == LEADER:
            self.watch.leading(True, self.token)
        if role == LEADER:
            logger.info(
                "beat: %s as %s: enqueueing from now on (lease %.1fs, renewed every %.1fs)",
                what,
                self.token,
                self.ttl_ms / 1000,
                self.renew_interval,
            )
            return
        holder = calls.call(calls.store.leader)
        if self.watch is not None:
            self.watch.leading(False, holder.token if holder else None)
        logger.info(
            "beat: %s as %s: the lease is held by %s; trying to take over every %.1fs",
            what,
            self.token,
            holder.token if holder else "nobody",
            self.standby_interval,
        )
        if holder is not None:
            self._compare_schedules(calls, holder.token)

    def _compare_schedules(self, calls: StoreCalls, leader: str) -> None:
        """Warn once when the leader runs another schedule: two apps that share one store and
        prefix share one lease, and only one of them runs."""
        theirs = next(
            (
                beat.schedule_digest
                for beat in calls.call(calls.store.beats)
                if beat.token == leader
            ),
            "",
        )
        if not theirs or not self.schedule_digest or theirs == self.schedule_digest:
            return
        if self._warned_digest != theirs:
            self._warned_digest = theirs
            logger.warning(
                "beat: the leader %s runs a different schedule than this beat; expected for a "
                "moment during a deploy, but if it belongs to another app, give each app its "
                "own hashbeat_key_prefix, or only one of them will ever run its tasks",
                leader,
            )

    def failed(self, exc: BaseException, now: float) -> None:
        """The store did not answer: stand by (enqueue nothing) and retry with backoff."""
        stepped_down = "stepped down as leader, " if self.leader else ""
        self.leader = False
        self._role = None
        if self.watch is not None:
            self.watch.store_failed(exc)
            self.watch.leading(False, None)
        self.due_s = now + (RECLAIM_RETRY if now < self.held_until else self._backoff)
        if isinstance(exc, StoreAuthError):
            began = self._outage.failed(
                exc,
                "beat: the store refused the credentials (%s): %senqueueing nothing until the "
                "settings are fixed; retrying",
                exc,
                stepped_down,
                level=logging.ERROR,
            )
        elif isinstance(exc, StoreError):
            began = self._outage.failed(
                exc,
                "beat: the store is unreachable (%s): %senqueueing nothing until it answers",
                exc,
                stepped_down,
            )
        else:
            began = self._outage.failed(
                exc,
                "beat: the store failed: %senqueueing nothing until it answers",
                stepped_down,
                level=logging.ERROR,
                traceback=True,
            )
        if not began and logger.isEnabledFor(logging.DEBUG):
            logger.debug("beat: the store is still unreachable: %s", exc)
        self._backoff = min(self._backoff * 2, BACKOFF_CAP)

    def _answered(self) -> None:
        if self.watch is not None:
            self.watch.store_answered()
        self._outage.answered()
        self._backoff = self.standby_interval / 2

    def release(self, calls: StoreCalls) -> None:
        """Give the lease up on a clean shutdown, so a standby takes over within a second."""
        if not self.leader:
            return
        self.leader = False
        self._role = None  # acquired again (a beat that stood aside for its broker), it says so
        if self.watch is not None:
            self.watch.leading(False, None)
        try:
            released = calls.call(calls.store.release, self.token)
        except Exception as exc:
            logger.info("beat: could not release the lease (%s); it lapses by itself", exc)
            return
        if released:
            logger.info("beat: released the lease held as %s", self.token)
