"""UTC offsets and their transitions for a tzinfo, in integer epoch seconds.

DST rules need to know where a zone's offset changes. tzinfo only answers "what is the offset at
this instant", so each year's transitions are found once (a daily probe, then a binary search to
the second) and kept, shared by every expression in that zone.
"""

from __future__ import annotations

import bisect
from datetime import date, datetime, timezone, tzinfo
from functools import lru_cache
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from celery_hashbeat.expr.errors import CronSyntaxError

DAY = 86400
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# Years before 1 and after 9999 have no datetime; probing stays inside.
FIRST_YEAR, LAST_YEAR = 2, 9998


class Transition(NamedTuple):
    """At ``at`` the offset changes from ``before`` to ``after`` (seconds east of UTC)."""

    at: int
    before: int
    after: int


class Segment(NamedTuple):
    """A span of instants with one offset: wall time = instant + offset inside [start, end).

    ``previous`` is the offset just before ``start`` (equal to ``offset`` where ``start`` is only
    the edge of what is known, not a transition).
    """

    start: int
    end: int
    offset: int
    previous: int


UTC_NAMES = frozenset(
    {
        "UTC",
        "Etc/UTC",
        "Etc/UCT",
        "UCT",
        "Etc/Universal",
        "Universal",
        "Zulu",
        "Etc/Zulu",
        "GMT",
        "Etc/GMT",
        "Etc/GMT0",
        "Etc/GMT+0",
        "Etc/GMT-0",
        "GMT0",
        "GMT+0",
        "GMT-0",
        "Etc/Greenwich",
        "Greenwich",
    }
)


def load_zone(tz: str | tzinfo | None) -> tzinfo:
    """The tzinfo for a zone name, a tzinfo, or None (UTC); an unknown name is a clear error."""
    if tz is None:
        return timezone.utc
    if isinstance(tz, tzinfo):
        return tz
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronSyntaxError(
            f"unknown time zone {tz!r}: use an IANA name such as 'Europe/Riga' or 'UTC'"
        ) from exc


class Zone:
    """A tzinfo with its transitions at hand, and the segment last asked for."""

    __slots__ = (
        "_last",
        "_segment_starts",
        "_segments",
        "_starts",
        "_transitions",
        "_years_done",
        "fixed",
        "fixed_offset",
        "tz",
    )

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz
        self.fixed = isinstance(tz, timezone) or str(tz) in UTC_NAMES
        constant = tz.utcoffset(None) if isinstance(tz, timezone) else None
        self.fixed_offset = int(constant.total_seconds()) if constant is not None else 0
        self._years_done: set[int] = set()
        self._transitions: list[Transition] = []
        self._starts: list[int] = []
        self._segments: list[Segment] = []
        self._segment_starts: list[int] = []
        self._last = Segment(0, 0, 0, 0)

    def offset_at(self, instant: int) -> int:
        offset = datetime.fromtimestamp(instant, self.tz).utcoffset()
        return int(offset.total_seconds()) if offset is not None else 0

    def segment(self, instant: int) -> Segment:
        """The span of one offset around ``instant``, bounded by transitions or by the years
        learned (the year before to the year after), whichever is nearer."""
        last = self._last
        if last.start <= instant < last.end:
            return last
        index = bisect.bisect_right(self._segment_starts, instant) - 1
        if index >= 0 and instant < self._segments[index].end:
            self._last = self._segments[index]
            return self._last
        self._last = self._new_segment(instant, index)
        return self._last

    def _new_segment(self, instant: int, index: int) -> Segment:
        year = _year_of(instant)
        for learn in (year - 1, year, year + 1):
            if FIRST_YEAR <= learn <= LAST_YEAR:
                self._learn(learn)
        start = _year_start(year - 1)
        end = _year_start(year + 2)
        offset = self.offset_at(instant)
        previous = offset
        at = bisect.bisect_right(self._starts, instant)
        if at > 0 and self._starts[at - 1] >= start:
            start, previous = self._starts[at - 1], self._transitions[at - 1].before
        if at < len(self._starts) and self._starts[at] < end:
            end = self._starts[at]
        if index >= 0:
            start = max(start, self._segments[index].end)
        if index + 1 < len(self._segments):
            end = min(end, self._segments[index + 1].start)
        segment = Segment(start, end, offset, previous)
        self._segments.insert(index + 1, segment)
        self._segment_starts.insert(index + 1, start)
        return segment

    def _learn(self, year: int) -> None:
        if year in self._years_done:
            return
        self._years_done.add(year)
        start, end = _year_start(year), _year_start(year + 1)
        probe, offset = start, self.offset_at(start)
        while probe < end:
            following = min(probe + DAY, end)
            next_offset = self.offset_at(following)
            if next_offset != offset:
                at = self._first_with(probe, following, next_offset)
                self._insert(Transition(at, offset, next_offset))
            probe, offset = following, next_offset

    def _first_with(self, low: int, high: int, offset: int) -> int:
        """The first instant in (low, high] whose offset is ``offset``."""
        while high - low > 1:
            middle = (low + high) // 2
            if self.offset_at(middle) == offset:
                high = middle
            else:
                low = middle
        return high

    def _insert(self, transition: Transition) -> None:
        index = bisect.bisect_left(self._starts, transition.at)
        if index < len(self._starts) and self._starts[index] == transition.at:
            return
        self._starts.insert(index, transition.at)
        self._transitions.insert(index, transition)


@lru_cache(maxsize=512)
def _shared_zone(tz: tzinfo) -> Zone:
    return Zone(tz)


def zone_for(tz: tzinfo) -> Zone:
    """The Zone of ``tz``, shared by every expression in it (a tzinfo that cannot be hashed, as
    some third-party ones, gets one of its own)."""
    try:
        return _shared_zone(tz)
    except TypeError:
        return Zone(tz)


def _year_start(year: int) -> int:
    """Epoch seconds of 1 January of ``year``, by arithmetic: years past 9999 have no datetime."""
    before = year - 1
    ordinal = 365 * before + before // 4 - before // 100 + before // 400 + 1
    return (ordinal - EPOCH_ORDINAL) * DAY


def _year_of(instant: int) -> int:
    return date.fromordinal(instant // DAY + EPOCH_ORDINAL).year
