"""The window ``hashbeat spread`` counts in, and the load it counts: every slot source's fires
per bucket (a minute, or a second when an entry can fire within a minute)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

import click

from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.expr.slots import CalendarSlots, Slots, to_ms

#: Fires counted at most, over all distinct schedules, before spread gives up: a week of one
#: entry firing every second is 604,800.
MAX_FIRES = 5_000_000

#: Slot sources to count, each with how many entries share it (each of its fires counts as many).
Sources = list[tuple[Slots, int]]


@dataclass(frozen=True)
class Load:
    """Enqueues per bucket over the window."""

    counts: list[int]

    @property
    def total(self) -> int:
        return sum(self.counts)

    @property
    def peak(self) -> int:
        return max(self.counts)

    @property
    def mean(self) -> float:
        return self.total / len(self.counts)

    @property
    def ratio(self) -> float | None:
        """Peak over mean: 1 is flat, the number of buckets is everything in one."""
        return self.peak / self.mean if self.total else None


@dataclass(frozen=True)
class Window:
    """``span`` of real time from ``start``, cut into buckets of ``bucket`` each."""

    start: datetime
    span: timedelta
    bucket: timedelta

    @property
    def bucket_ms(self) -> int:
        return self.bucket // timedelta(milliseconds=1)

    def count(self, sources: Sources) -> Load:
        """Every source's fires in the window, each weighted by how many entries share it."""
        start = to_ms(self.start)
        end = to_ms(self.start + self.span)
        counts = [0] * -(-(end - start) // self.bucket_ms)
        budget = MAX_FIRES
        for source, weight in sources:
            slot = source.next_after(start - 1)
            while slot < end:
                counts[(slot - start) // self.bucket_ms] += weight
                budget -= 1
                if not budget:
                    raise click.UsageError(
                        f"more than {MAX_FIRES:,} distinct fires in the window: too many to "
                        "count; try a day instead of --week"
                    )
                slot = source.next_after(slot)
        return Load(counts)

    def at(self, index: int) -> datetime:
        """The start of bucket ``index``, in the window's zone."""
        return datetime.fromtimestamp(
            self.start.timestamp() + self.bucket.total_seconds() * index, self.start.tzinfo
        )


def window_of(first: date, zone: tzinfo, week: bool, fine: bool) -> Window:
    """The day (or ``week``) from ``first`` in ``zone``, in buckets of a second when ``fine``,
    else of a minute."""
    start = datetime.combine(first, time(), zone)
    end = datetime.combine(first + timedelta(days=7 if week else 1), time(), zone)
    span = timedelta(seconds=end.timestamp() - start.timestamp())  # real time: DST days differ
    return Window(start, span, timedelta(seconds=1 if fine else 60))


def calendar_counts(entries: list[Entry], window: Window) -> tuple[int, int]:
    """How many slots of ``entries`` in the window their calendars leave out, and move."""
    start, end = to_ms(window.start), to_ms(window.start + window.span)
    excluded = moved = 0
    for source, weight in Counter(entry.source for entry in entries).items():
        if not isinstance(source, CalendarSlots):
            continue
        slot = source.inner.next_after(start - 1)
        while slot < end:
            fate = source.fate(slot)
            excluded += weight if fate is None else 0
            moved += weight if fate is not None and fate != slot else 0
            slot = source.inner.next_after(slot)
    return excluded, moved
