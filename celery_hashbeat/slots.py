"""Slot arithmetic: when an entry fires, as UTC epoch milliseconds.

Every kind of schedule is reduced to one small interface, ``next_after`` and ``recent``, so the
scheduler's heap and its catch-up never care which kind of schedule an entry has. Sources that many
entries share (one expression, one crontab) remember their last answer, because entries that fire
together ask the same question one after another.
"""

from __future__ import annotations

import abc
import copy
from collections import deque
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from celery.schedules import BaseSchedule

from celery_hashbeat.expr import NoFireTimeError

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.expr import CronExpr

UTC = timezone.utc

#: How many slots a forward scan may step through before it re-anchors near the present.
SCAN_LIMIT = 1000

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MILLISECOND = timedelta(milliseconds=1)


def to_datetime(ms: int) -> datetime:
    """An aware UTC datetime for an epoch-milliseconds slot."""
    return datetime.fromtimestamp(ms / 1000, UTC)


def to_ms(moment: datetime) -> int:
    """Epoch milliseconds of an aware datetime (naive ones are read as UTC, as Celery does)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // MILLISECOND


def duration_ms(delta: timedelta) -> int:
    """A duration in whole milliseconds, rounded up so a slot never lands before its instant."""
    return -(-delta // MILLISECOND)


class Slots(abc.ABC):
    """The instants one entry fires at."""

    __slots__ = ()

    @abc.abstractmethod
    def next_after(self, ms: int) -> int:
        """The first slot strictly after ``ms``."""

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        """The last ``limit`` slots in ``(low, high]``, oldest first.

        A forward scan; a source that can step backwards overrides it. A scan longer than
        SCAN_LIMIT restarts a few steps before ``high``, so a schedule whose slots depend on where
        the chain started is re-anchored there rather than walked for minutes.
        """
        found: deque[int] = deque(maxlen=limit)
        slot = self.next_after(low)
        steps = 0
        anchored = False
        while slot <= high:
            found.append(slot)
            steps += 1
            following = self.next_after(slot)
            if steps >= SCAN_LIMIT and not anchored:
                anchored = True
                found.clear()
                following = self.next_after(max(low, high - (following - slot) * (limit + 1)))
            slot = following
        return list(found)


class CronSlots(Slots):
    """A parsed expression; entries whose expressions resolve alike share one."""

    __slots__ = ("_after", "_next", "expr")

    def __init__(self, expr: CronExpr) -> None:
        self.expr = expr
        self._after = -1
        self._next = -1

    def next_after(self, ms: int) -> int:
        if ms != self._after:
            self._next = self.expr.next_timestamp(ms // 1000) * 1000
            self._after = ms
        return self._next

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        found: list[int] = []
        before = high // 1000 + 1
        while len(found) < limit:
            try:
                before = self.expr.prev_timestamp(before)
            except NoFireTimeError:
                break
            if before * 1000 <= low:
                break
            found.append(before * 1000)
        found.reverse()
        return found


class IntervalSlots(Slots):
    """Every ``period`` ms at ``offset`` ms into each period, periods counted from the epoch."""

    __slots__ = ("offset", "period")

    def __init__(self, period: int, offset: int) -> None:
        self.period = period
        self.offset = offset

    def _at_or_before(self, ms: int) -> int:
        return ms - (ms - self.offset) % self.period

    def next_after(self, ms: int) -> int:
        return self._at_or_before(ms) + self.period

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        last = self._at_or_before(high)
        first = max(self.next_after(low), last - (limit - 1) * self.period)
        return list(range(first, last + 1, self.period))


class ChainSlots(Slots):
    """Celery's plain ``schedule``: each slot ``every`` ms after the one before, as its
    ``remaining_estimate`` computes, without a call per slot."""

    __slots__ = ("every",)

    def __init__(self, every: int) -> None:
        if every < 1:
            raise ValueError(f"the interval must be at least 1 ms, not {every} ms")
        self.every = every

    def next_after(self, ms: int) -> int:
        return ms + self.every

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        if high <= low:
            return []
        last = low + (high - low) // self.every * self.every
        first = max(low + self.every, last - (limit - 1) * self.every)
        return list(range(first, last + 1, self.every))


class DerivedSlots(Slots):
    """Any other Celery schedule (crontab, solar, relative, custom), asked through its own API.

    A private copy of the schedule reads a frozen clock set to the instant asked about, so
    ``now + remaining_estimate(last_run_at=now)`` is a pure function of that instant: the next
    slot, deterministic whatever the real time and whichever beat asks.
    """

    __slots__ = ("_after", "_frozen", "_next", "schedule")

    def __init__(self, schedule: BaseSchedule, app: Celery) -> None:
        clone: Any = copy.copy(schedule)
        clone.app = app
        clone.nowfun = self._now
        self.schedule = clone
        self._frozen = EPOCH
        self._after = -1
        self._next = -1

    def _now(self) -> datetime:
        return self._frozen

    def _estimate(self, moment: datetime) -> int:
        try:
            return duration_ms(self.schedule.remaining_estimate(moment))
        except NotImplementedError:
            return duration_ms(timedelta(seconds=self.schedule.is_due(moment)[1]))

    def next_after(self, ms: int) -> int:
        if ms != self._after:
            self._frozen = moment = to_datetime(ms)
            remaining = self._estimate(moment)
            if remaining <= 0:
                raise ValueError(f"{self.schedule!r} never moves past {moment.isoformat()}")
            self._next = ms + remaining
            self._after = ms
        return self._next
