"""UTC offsets and their transitions for a tzinfo, in integer epoch seconds.

DST rules need to know where a zone's offset changes. tzinfo only answers "what is the offset at
this instant", so each year's transitions are found once (a daily probe, then a binary search to
the second) and kept, shared by every expression in that zone.
"""

from __future__ import annotations

import bisect
from datetime import datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import CronSyntaxError

DAY = 86400
# Years before 1 and after 9999 have no datetime; probing stays inside.
FIRST_YEAR, LAST_YEAR = 2, 9998


class Transition(NamedTuple):
    """At ``at`` the offset changes from ``before`` to ``after`` (seconds east of UTC)."""

    at: int
    before: int
    after: int


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
    """A tzinfo with its transitions at hand."""

    __slots__ = ("_starts", "_transitions", "_years_done", "fixed", "tz")

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz
        self.fixed = isinstance(tz, timezone)
        self._years_done: set[int] = set()
        self._transitions: list[Transition] = []
        self._starts: list[int] = []

    def offset_at(self, instant: int) -> int:
        offset = datetime.fromtimestamp(instant, self.tz).utcoffset()
        return int(offset.total_seconds()) if offset is not None else 0

    def next_transition(self, instant: int, horizon: int) -> Transition | None:
        """The first transition strictly after ``instant`` and at most at ``horizon``."""
        if self.fixed:
            return None
        year = _year_of(instant)
        while year <= LAST_YEAR and _year_start(year) <= horizon:
            self._learn(year)
            index = bisect.bisect_right(self._starts, instant)
            if index < len(self._starts) and _year_of(self._starts[index]) <= year:
                found = self._transitions[index]
                return found if found.at <= horizon else None
            year += 1
        return None

    def prev_transition(self, instant: int, horizon: int) -> Transition | None:
        """The last transition at or before ``instant`` and at least at ``horizon``."""
        if self.fixed:
            return None
        year = _year_of(instant)
        while year >= FIRST_YEAR and _year_start(year + 1) > horizon:
            self._learn(year)
            index = bisect.bisect_right(self._starts, instant) - 1
            if index >= 0 and _year_of(self._starts[index]) >= year:
                found = self._transitions[index]
                return found if found.at >= horizon else None
            year -= 1
        return None

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
def zone_for(tz: tzinfo) -> Zone:
    return Zone(tz)


def _year_start(year: int) -> int:
    return (datetime(year, 1, 1) - datetime(1970, 1, 1)) // timedelta(seconds=1)


def _year_of(instant: int) -> int:
    return (datetime(1970, 1, 1) + timedelta(seconds=instant)).year
