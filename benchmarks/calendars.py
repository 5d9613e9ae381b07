"""Exclusion calendars: the cost of next() with a holiday calendar beside the same schedule
without one (docs/design.md §20; the bar: within 2x).

    python benchmarks/calendars.py [--count 20000]

Each row times ``Slots.next_after`` walked forward ``--count`` times (each answer fed back in, as
the beat's heap asks), through 2027 and 2028 in the schedule's zone and round again: the plain
slot source, then the same source wrapped in ``CalendarSlots`` with ``sat,sun`` plus a country's
public holidays (``holidays:US`` or ``holidays:DE-BY``), skipping, moving to the next business
day, and (the last two columns) moving to the previous one. The calendar's years are built
before timing: a beat builds each year's set once, at its first slot of that year, and the
``year ms`` column says what that costs (the ``holidays`` package's answer for one year, plus
the set). A report, never a test: the fastest of several repeats, the sources taken in turn;
nothing asserted.

The ratios are per call (the bar). A calendar also leaves fewer slots to ask for (a weekend's
slots are skipped, or become Monday's), so a beat running the schedule for a year makes fewer
calls; the ``/year`` ratios weigh each source's cost per call by its slots in the two years.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from celery_hashbeat.expr import parse
from celery_hashbeat.expr.calendar import parse_calendar
from celery_hashbeat.expr.slots import (
    CalendarSlots,
    CronSlots,
    IntervalSlots,
    Slots,
    to_ms,
)

CASES = [
    ("H 9 * * *", "America/New_York", "holidays:US"),
    ("H/15 H(9-16) * * *", "America/New_York", "holidays:US"),
    ("*/5 * * * *", "Europe/Berlin", "holidays:DE-BY"),
    ("H H * * *", "Europe/Berlin", "holidays:DE-BY"),
    ("interval 3600 s", "UTC", "holidays:US"),
]


def source_for(text: str, zone: str) -> Slots:
    if text.startswith("interval"):
        return IntervalSlots(int(text.split()[1]) * 1000, 1234)
    return CronSlots(parse(text, key="bench", tz=zone))


def walk(slots: Slots, start: int, end: int, count: int) -> float:
    """Seconds for ``count`` next_after calls, each from the previous answer (back to ``start``
    past ``end``)."""
    began = time.perf_counter()
    ms = start
    for _ in range(count):
        ms = slots.next_after(ms)
        if ms >= end:
            ms = start
    return time.perf_counter() - began


def slots_in(slots: Slots, start: int, end: int) -> int:
    """How many slots ``slots`` has in [start, end)."""
    count, ms = 0, slots.next_after(start - 1)
    while ms < end:
        count, ms = count + 1, slots.next_after(ms)
    return count


def best(sources: list[Slots], start: int, end: int, count: int, repeats: int) -> list[float]:
    """The fastest of ``repeats`` walks of each source (us per call), taken in turn, so that a
    busy machine slows them alike."""
    for slots in sources:
        walk(slots, start, end, count)  # the years' sets built, as a beat has them
    times: list[list[float]] = [[] for _ in sources]
    for _ in range(repeats):
        for index, slots in enumerate(sources):
            times[index].append(walk(slots, start, end, count))
    return [min(found) / count * 1e6 for found in times]


def year_build_ms(spec: str) -> float:
    """Building one year's set of a fresh calendar (ms)."""
    calendar = parse_calendar(["sat,sun", spec])
    began = time.perf_counter()
    calendar.excluded(datetime(2031, 6, 1).toordinal())
    return (time.perf_counter() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    header = (
        f"{'schedule':<22}{'zone':<18}{'calendar':<24}{'plain us':>10}"
        f"{'skip us':>10}{'ratio':>7}{'moved us':>10}{'ratio':>7}{'year ms':>9}"
        f"{'skip/year':>11}{'moved/year':>11}{'prev us':>9}{'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    for text, zone, holidays in CASES:
        tz = ZoneInfo(zone)
        start = to_ms(datetime(2027, 1, 1, tzinfo=tz))
        end = to_ms(datetime(2029, 1, 1, tzinfo=tz))
        calendar = parse_calendar(["sat,sun", holidays])
        sources = [
            source_for(text, zone),
            CalendarSlots(source_for(text, zone), calendar, tz, "skip"),
            CalendarSlots(source_for(text, zone), calendar, tz, "next_business_day"),
            CalendarSlots(source_for(text, zone), calendar, tz, "previous_business_day"),
        ]
        plain, skip, moved, back = best(sources, start, end, args.count, args.repeats)
        many, kept, landed, _ = (slots_in(slots, start, end) for slots in sources)
        print(
            f"{text:<22}{zone:<18}{'sat,sun + ' + holidays:<24}{plain:>10.2f}"
            f"{skip:>10.2f}{skip / plain:>7.2f}{moved:>10.2f}{moved / plain:>7.2f}"
            f"{year_build_ms(holidays):>9.1f}"
            f"{skip * kept / (plain * many):>11.2f}{moved * landed / (plain * many):>11.2f}"
            f"{back:>9.2f}{back / plain:>7.2f}"
        )


if __name__ == "__main__":
    main()
