"""A zone's local days as epoch milliseconds: which day an instant falls on, where a day starts,
and an instant put on another day at the same local time of day (docs/design.md §20).

Worked from the zone's offset spans, not datetimes: the span around the instant asked last is
kept, so inside it each answer is a little integer arithmetic. Used by ``CalendarSlots``.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone, tzinfo

from celery_hashbeat.expr.zones import DAY as DAY_S
from celery_hashbeat.expr.zones import EPOCH_ORDINAL, zone_for

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MILLISECOND = timedelta(milliseconds=1)

#: A day of a fixed offset, in milliseconds.
DAY_MS = DAY_S * 1000


class LocalDays:
    """The local days of zone ``tz``; days are ordinals (``date.toordinal``)."""

    __slots__ = ("_span", "_zone", "tz")

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz
        self._zone = zone_for(tz)
        #: The span of one UTC offset asked about last: (start s, end s, offset s).
        self._span = (0, 0, 0)

    def span_of(self, seconds: int) -> tuple[int, int, int]:
        """The span of one UTC offset around ``seconds`` (epoch s), as (start, end, offset)."""
        span = self._span
        if span[0] <= seconds < span[1]:
            return span
        zone = self._zone
        if zone.fixed:
            span = (-(2**62), 2**62, zone.fixed_offset)
        else:
            segment = zone.segment(seconds)
            span = (segment.start, segment.end, segment.offset)
        self._span = span
        return span

    def one_offset(self, low: int, high: int) -> bool:
        """Whether the instants from ``low`` to ``high`` (ms) all have one UTC offset."""
        span = self._span
        if not span[0] * 1000 <= low < span[1] * 1000:
            span = self.span_of(low // 1000)
        return high <= span[1] * 1000

    def steady(self, first: int, end: int) -> bool:
        """Whether local days [``first``, ``end``) all have one UTC offset (from the first's
        start to the last's end)."""
        low = self.day_start(first)
        return self.one_offset(low, low + (end - first) * DAY_MS)

    def bounds(self, first: int, end: int) -> tuple[int, int]:
        """The first instants (ms) of days ``first`` and ``end``: by arithmetic when one
        offset holds over both."""
        local = (first - EPOCH_ORDINAL) * DAY_S
        start, stop, offset = self._span
        low, high = local - offset, local + (end - first) * DAY_S - offset
        if start <= low and high < stop:
            return low * 1000, high * 1000
        return self.day_start(first), self.day_start(end)

    def day_of(self, ms: int) -> int:
        """The local day of instant ``ms``."""
        seconds = ms // 1000
        offset = self.span_of(seconds)[2]
        return (seconds + offset) // DAY_S + EPOCH_ORDINAL

    def day_start(self, day: int) -> int:
        """The first instant (ms) of local day ``day``."""
        local = (day - EPOCH_ORDINAL) * DAY_S
        first, last, offset = self._span
        guess = local - offset
        if first <= guess < last:
            return guess * 1000
        zone = self._zone
        guess = local - zone.segment(local).offset
        if guess + zone.segment(guess).offset == local:
            return guess * 1000
        # Midnight falls in a daylight saving gap: the day starts where the gap ends.
        return to_ms(datetime.combine(date.fromordinal(day), time(), tzinfo=self.tz))

    def moved(self, slot: int, day: int) -> int:
        """Instant ``slot`` at the same local time of day on day ``day``."""
        seconds, part = divmod(slot, 1000)
        first, last, offset = self.span_of(seconds)
        midnight = (day - EPOCH_ORDINAL) * DAY_S - offset
        guess = midnight + (seconds + offset) % DAY_S
        if first <= midnight and guess < last:  # one offset from its day's start: arithmetic
            return guess * 1000 + part
        local = to_datetime(slot).astimezone(self.tz)
        target = datetime.combine(date.fromordinal(day), local.time(), tzinfo=self.tz)
        return to_ms(target.replace(fold=local.fold))


def to_datetime(ms: int) -> datetime:
    """An aware UTC datetime for an epoch-milliseconds slot."""
    return datetime.fromtimestamp(ms / 1000, UTC)


def to_ms(moment: datetime) -> int:
    """Epoch milliseconds of an aware datetime (naive ones are read as UTC, as Celery does)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - EPOCH) // MILLISECOND
