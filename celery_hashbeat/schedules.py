"""hashcron and hashinterval: the engine inside Celery's schedule API.

Both are ordinary ``celery.schedules.BaseSchedule`` objects, so any beat can run them. Nothing is
parsed or checked until first use: a ``beat_schedule`` may declare an unkeyed schedule, which
``celery_hashbeat.Scheduler`` binds to its entry name, and a malformed one costs only its own
entry. Used elsewhere without a key, a hashed term raises the engine's CronSyntaxError at first
use, saying how to give one.
"""

from __future__ import annotations

import abc
import copy
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, TypeVar

from celery.schedules import BaseSchedule, schedstate

from celery_hashbeat.expr import parse
from celery_hashbeat.expr.calendar import check_on_excluded, parse_calendar
from celery_hashbeat.expr.resolve import resolver_for
from celery_hashbeat.expr.seeding import Key, draw
from celery_hashbeat.expr.slots import (
    MILLISECOND,
    CalendarSlots,
    CronSlots,
    IntervalSlots,
    Slots,
    to_ms,
)
from celery_hashbeat.expr.zones import load_zone

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from celery import Celery

    from celery_hashbeat.expr import CronExpr

__all__ = ["HashSchedule", "at", "hashcron", "hashinterval"]

S = TypeVar("S", bound="HashSchedule")

UNKEYED_INTERVAL = (
    "hashinterval needs a key to draw its offset: pass key=..., or run the entry under "
    "celery_hashbeat.Scheduler, which keys it by the entry's name"
)


def excluded_days(exclude: Iterable[str] | str | None) -> tuple[str, ...]:
    """An ``exclude`` argument as a tuple of its entries (checked at first use, as the rest)."""
    if exclude is None:
        return ()
    if isinstance(exclude, str):
        return (exclude,)
    return tuple(exclude)


class HashSchedule(BaseSchedule, abc.ABC):
    """What hashcron and hashinterval share: a key that may come later, and slots drawn from it."""

    def __init__(
        self,
        key: Key | None,
        app: Celery | None,
        nowfun: Callable[[], datetime] | None,
    ) -> None:
        super().__init__(nowfun=nowfun, app=app)
        self.key = key
        self._own: Slots | None = None

    @abc.abstractmethod
    def slots(self, default_key: Key | None = None) -> Slots:
        """The slots of this schedule, keyed by its own key, else by ``default_key``."""

    @abc.abstractmethod
    def _identity(self) -> tuple[Any, ...]:
        """What makes two schedules of this kind equal."""

    #: The exclude list (docs/design.md §20), as given; empty: every day.
    exclude: tuple[str, ...] = ()
    #: What a slot on an excluded day does: None (skip), or one of expr.calendar.ON_EXCLUDED.
    on_excluded: str | None = None

    def excluding(self, slots: Slots, tz: tzinfo) -> Slots:
        """``slots`` without the excluded days (itself when nothing is excluded)."""
        if not self.exclude:
            return slots
        mode = check_on_excluded(self.on_excluded)
        return CalendarSlots(slots, parse_calendar(self.exclude), tz, mode)

    def _calendar_repr(self) -> str:
        if not self.exclude:
            return ""
        mode = f", on_excluded={self.on_excluded!r}" if self.on_excluded else ""
        return f", exclude={list(self.exclude)!r}{mode}"

    def bound(self: S, key: Key) -> S:
        """This schedule keyed by ``key``, unless it was given a key of its own."""
        if self.key is not None:
            return self
        clone = copy.copy(self)
        clone.key = key
        clone._own = None
        return clone

    def next_slot(self, after_ms: int) -> int:
        """The first slot strictly after ``after_ms`` (UTC epoch milliseconds)."""
        if self._own is None:
            self._own = self.slots()
        return self._own.next_after(after_ms)

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        now = to_ms(self.now())
        return (self.next_slot(to_ms(last_run_at)) - now) * MILLISECOND

    def is_due(self, last_run_at: datetime) -> schedstate:
        now = to_ms(self.now())
        following = self.next_slot(to_ms(last_run_at))
        if following > now:
            return schedstate(is_due=False, next=(following - now) / 1000)
        return schedstate(is_due=True, next=(self.next_slot(now) - now) / 1000)

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            assert isinstance(other, HashSchedule)
            return self._identity() == other._identity()
        return NotImplemented

    def __hash__(self) -> int:
        return hash((type(self).__name__, *self._identity()))


class hashcron(HashSchedule):  # noqa: N801 - named like Celery's crontab
    """A cron expression whose ``H`` terms are drawn from the key (docs/design.md §2-§3).

    ``tz`` (a zone name or tzinfo) defaults to the app's timezone; ``day_and=True`` asks a day to
    match both day fields, as Celery's crontab does. ``balanced=True`` (or the setting
    ``hashbeat_balance`` while ``balanced`` is None) lets celery_hashbeat.Scheduler choose the
    hash terms so that entries of the same shape spread evenly (docs/design.md §16).
    """

    def __init__(
        self,
        expr: str,
        key: Key | None = None,
        tz: str | tzinfo | None = None,
        day_and: bool = False,
        app: Celery | None = None,
        balanced: bool | None = None,
        *,
        nowfun: Callable[[], datetime] | None = None,
        exclude: Iterable[str] | str | None = None,
        on_excluded: str | None = None,
    ) -> None:
        super().__init__(key, app, nowfun)
        self.exclude, self.on_excluded = excluded_days(exclude), on_excluded
        self.expr = expr
        self.zone = tz
        self.day_and = day_and
        self.balanced = balanced
        #: The balancer's choice of hash terms (expr.balance), set by the Scheduler; None: hash.
        self.offsets: tuple[int, ...] | None = None

    def placed(self, offsets: tuple[int, ...]) -> hashcron:
        """This schedule with its hash terms at ``offsets`` (the balancer's assignment); a
        plain attribute copy, since a schedule of 100,000 entries is placed at start."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.offsets = offsets
        clone._own = None
        return clone

    def compile(self, default_key: Key | None = None, default_zone: Any = None) -> CronExpr:
        """The parsed expression, keyed by this schedule's key, else by ``default_key``, in this
        schedule's zone, else ``default_zone`` (the scheduler's app's), else its own app's."""
        key = self.key if self.key is not None else default_key
        zone = self.zone if self.zone is not None else default_zone or self.app.timezone
        return parse(self.expr, key, tz=zone, day_and=self.day_and, offsets=self.offsets)

    def slots(self, default_key: Key | None = None) -> Slots:
        expr = self.compile(default_key)
        return self.excluding(CronSlots(expr), expr.tz)

    def identity(self, default_key: Key, default_zone: Any) -> tuple[str, bool, str] | None:
        """What decides this schedule's slots for ``default_key``: its resolved text, day rule
        and zone's name, found without building a CronExpr (schedules that agree share one
        slot source: at a million entries, start-up is the budget). Plain strings, so that
        looking it up costs no Python-level hashing. None when ``compile`` must say what is
        wrong."""
        if not isinstance(self.expr, str):
            return None
        key = self.key if self.key is not None else default_key
        zone = self.zone if self.zone is not None else default_zone
        resolved = resolver_for(self.expr).resolve(key, self.day_and, self.offsets)
        return resolved.resolved_text, resolved.day_and, str(zone)

    def _identity(self) -> tuple[Any, ...]:
        found = (self.expr, self.key, self.zone, self.day_and, self.balanced, self.offsets)
        return found if not self.exclude else (*found, self.exclude, self.on_excluded)

    def __repr__(self) -> str:
        extras = "".join(
            f", {name}={value!r}"
            for name, value in (("key", self.key), ("tz", self.zone), ("balanced", self.balanced))
            if value is not None
        )
        if self.day_and:
            extras += ", day_and=True"
        return f"hashcron({self.expr!r}{extras}{self._calendar_repr()})"

    def __reduce__(self) -> tuple[type[hashcron], tuple[Any, ...], dict[str, Any]]:
        arguments = (self.expr, self.key, self.zone, self.day_and, None, self.balanced)
        state: dict[str, Any] = {"offsets": self.offsets}
        if self.exclude:
            state.update(exclude=self.exclude, on_excluded=self.on_excluded)
        return type(self), arguments, state


class hashinterval(HashSchedule):  # noqa: N801 - named like Celery's schedule
    """Every ``every`` (a timedelta or seconds) at an offset drawn from the key.

    Periods are counted from the Unix epoch, to the millisecond, so every beat and every restart
    agrees on the slots without remembering when anything started.
    """

    def __init__(
        self,
        every: float | timedelta,
        key: Key | None = None,
        app: Celery | None = None,
        *,
        nowfun: Callable[[], datetime] | None = None,
        exclude: Iterable[str] | str | None = None,
        on_excluded: str | None = None,
    ) -> None:
        super().__init__(key, app, nowfun)
        self.exclude, self.on_excluded = excluded_days(exclude), on_excluded
        self.every = every if isinstance(every, timedelta) else timedelta(seconds=every)

    def slots(self, default_key: Key | None = None) -> Slots:
        return self.excluding(self.interval_slots(default_key), load_zone(self.app.timezone))

    def interval_slots(self, default_key: Key | None = None) -> IntervalSlots:
        """The slots without the calendar (what entries share)."""
        period = self.every // MILLISECOND
        if period < 1:
            raise ValueError(f"hashinterval needs a period of at least 1 ms, not {self.every!r}")
        key = self.key if self.key is not None else default_key
        if key is None:
            raise ValueError(UNKEYED_INTERVAL)
        return IntervalSlots(period, draw(key, "interval", 0) % period)

    def _identity(self) -> tuple[Any, ...]:
        found = (self.every, self.key)
        return found if not self.exclude else (*found, self.exclude, self.on_excluded)

    def __repr__(self) -> str:
        key = f", key={self.key!r}" if self.key is not None else ""
        return f"hashinterval({self.every.total_seconds()!r}{key}{self._calendar_repr()})"

    def __reduce__(self) -> tuple[type[hashinterval], tuple[Any, ...], dict[str, Any]]:
        state = {"exclude": self.exclude, "on_excluded": self.on_excluded} if self.exclude else {}
        return type(self), (self.every, self.key), state


class at(BaseSchedule):  # noqa: N801 - named like Celery's schedules
    """One run at one instant (docs/design.md §21): an aware datetime or ISO 8601 text with an
    offset. Under celery_hashbeat.Scheduler it fires once, fenced in the store like any slot,
    and is then done; a naive time is refused, since beats in other zones would read it apart.
    """

    def __init__(
        self,
        when: datetime | str,
        app: Celery | None = None,
        *,
        nowfun: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(nowfun=nowfun, app=app)
        self.when = when_of(when)
        #: The instant, UTC epoch milliseconds.
        self.instant_ms = to_ms(self.when)

    def remaining_estimate(self, last_run_at: datetime) -> timedelta:
        return (self.instant_ms - to_ms(self.now())) * MILLISECOND

    def is_due(self, last_run_at: datetime) -> schedstate:
        """Due once the instant has come, unless the entry last ran at or after it (for Celery's
        own beat; celery_hashbeat plans the one slot itself)."""
        now, instant = to_ms(self.now()), self.instant_ms
        if to_ms(last_run_at) >= instant:
            return schedstate(is_due=False, next=ONE_DAY_S)
        if instant > now:
            return schedstate(is_due=False, next=(instant - now) / 1000)
        return schedstate(is_due=True, next=ONE_DAY_S)

    def __eq__(self, other: object) -> bool:
        if type(other) is at:
            assert isinstance(other, at)
            return self.instant_ms == other.instant_ms
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("at", self.instant_ms))

    def __repr__(self) -> str:
        return f"at({self.when.isoformat()!r})"

    def __reduce__(self) -> tuple[type[at], tuple[str]]:
        return type(self), (self.when.isoformat(),)


#: What ``at.is_due`` says to wait once its run is done (Celery's beat asks again by then).
ONE_DAY_S = 86400.0


def when_of(when: datetime | str) -> datetime:
    """An ``at`` instant, checked: aware, from a datetime or ISO 8601 text."""
    shown = when if isinstance(when, str) else getattr(when, "isoformat", lambda: when)()
    return aware_datetime(when, f"at({shown!r})")


def aware_datetime(value: object, name: str) -> datetime:
    """``value`` (an aware datetime, or ISO 8601 text with an offset) as a datetime; ``name``
    says where it was given, in the message of a ValueError."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"{name} must be an ISO 8601 date and time with its offset, such as "
                f"2026-12-01T06:00:00+00:00, not {value!r}"
            ) from None
    if not isinstance(value, datetime):
        raise ValueError(f"{name} must be an aware datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{name} is {value.isoformat()} with no time zone: give it one (an offset such as "
            f"+00:00, or tzinfo=ZoneInfo(...)), so that every beat reads the same instant"
        )
    return value
