"""``parse`` and ``CronExpr``: the engine's public face, datetimes in and out.

Everything heavy (tables, masks, zone transitions) is shared between expressions that resolve
alike, so a CronExpr itself is a few references; the scheduler's hot path uses
``next_timestamp``, which never builds a datetime.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, tzinfo

from celery_hashbeat.expr.days import every_day
from celery_hashbeat.expr.describe import describe
from celery_hashbeat.expr.errors import CronSyntaxError, NoFireTimeError
from celery_hashbeat.expr.resolve import Parsed, resolver_for
from celery_hashbeat.expr.seeding import Key
from celery_hashbeat.expr.timing import timing_for
from celery_hashbeat.expr.zones import load_zone, zone_for


def parse(
    expression: str,
    key: Key | None = None,
    *,
    tz: str | tzinfo | None = None,
    day_and: bool = False,
    offsets: tuple[int, ...] | None = None,
) -> CronExpr:
    """Parse a hash-cron expression. ``key`` seeds its ``H`` terms, unless ``offsets`` (from
    ``expr.balance.assign``) gives them; ``tz`` defaults to UTC."""
    if not isinstance(expression, str):
        raise CronSyntaxError(
            f"a cron expression must be a string, not {type(expression).__name__}"
        )
    parsed = resolver_for(expression).resolve(key, day_and, offsets)
    return CronExpr(parsed, expression, key, load_zone(tz), day_and, offsets)


class CronExpr:
    """A parsed expression bound to its key and time zone."""

    __slots__ = ("_parsed", "_timing", "day_and", "key", "offsets", "text", "tz")

    def __init__(
        self,
        parsed: Parsed,
        text: str,
        key: Key | None,
        tz: tzinfo,
        day_and: bool,
        offsets: tuple[int, ...] | None = None,
    ) -> None:
        self._parsed = parsed
        self.text = text
        self.key = key
        self.tz = tz
        self.day_and = day_and
        #: The balancer's offsets of the hash terms, or None when the key's hash gave them.
        self.offsets = offsets
        self._timing = timing_for(parsed.wall, zone_for(tz), parsed.fixed_time)

    @property
    def has_seconds(self) -> bool:
        """Whether the expression has a seconds field (its slots may be a second apart)."""
        return self._parsed.six_fields

    @property
    def same_every_day(self) -> bool:
        """Whether it fires at the same wall times every day (no day or month field limits it)."""
        resolved = self._parsed.resolved
        return len(resolved.months) == 12 and every_day(resolved.day)

    def next_timestamp(self, after: float) -> int:
        """Epoch seconds of the first fire strictly after ``after`` (epoch seconds)."""
        try:
            return self._timing.next_at_or_after(math.floor(after) + 1)
        except (OverflowError, ValueError) as exc:
            raise NoFireTimeError("no fire time before the end of the calendar") from exc

    def prev_timestamp(self, before: float) -> int:
        """Epoch seconds of the last fire strictly before ``before`` (epoch seconds)."""
        try:
            return self._timing.prev_at_or_before(math.ceil(before) - 1)
        except (OverflowError, ValueError) as exc:
            raise NoFireTimeError("no fire time after the start of the calendar") from exc

    def next(self, after: datetime) -> datetime:
        """The first fire strictly after ``after``; naive datetimes are read in this zone."""
        return self._datetime(self.next_timestamp(self._instant(after)))

    def prev(self, before: datetime) -> datetime:
        """The last fire strictly before ``before``; naive datetimes are read in this zone."""
        return self._datetime(self.prev_timestamp(self._instant(before)))

    def iter(self, after: datetime) -> Iterator[datetime]:
        """Fires after ``after``, in order, until the calendar ends."""
        instant = self._instant(after)
        while True:
            try:
                instant = self.next_timestamp(instant)
            except NoFireTimeError:
                return
            yield self._datetime(instant)

    def _datetime(self, instant: int) -> datetime:
        try:
            return datetime.fromtimestamp(instant, self.tz)
        except (OverflowError, ValueError) as exc:
            raise NoFireTimeError("the next fire time is past the end of the calendar") from exc

    def matches(self, when: datetime) -> bool:
        """Whether ``when`` is one of the fire instants (whole seconds only)."""
        instant = self._instant(when)
        return instant == int(instant) and self.next_timestamp(instant - 1) == instant

    def describe(self) -> str:
        """An English sentence for the resolved schedule."""
        return describe(self._parsed.resolved, self._parsed.six_fields)

    def _instant(self, when: datetime) -> float:
        if when.tzinfo is None:
            when = when.replace(tzinfo=self.tz)
        return when.timestamp()

    def __str__(self) -> str:
        return self._parsed.resolved_text

    def __repr__(self) -> str:
        key = f", key={self.key!r}" if self.key is not None else ""
        return f"<CronExpr {self.text!r}{key} -> {self._parsed.resolved_text!r} tz={self.tz}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CronExpr):
            return NotImplemented
        return (self._parsed, str(self.tz)) == (other._parsed, str(other.tz))

    def __hash__(self) -> int:
        return hash((self._parsed, str(self.tz)))
