"""What an entry's calendar (docs/design.md §20) does to its slots, as the operator's views say
it: the slots it leaves out, and where the slots it moves came from.

The beat needs neither: it asks the calendar for the next slot and sends that. An operator
reading "Mon 09:14" wants to know that it is Saturday's slot, moved, and that the holiday's slot
was left out; so the views ask the calendar's own answer (``CalendarSlots.fate``) of the schedule's
slots around the ones shown, rather than working it out again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from celery_hashbeat.entries.bounds import BoundedSlots
from celery_hashbeat.expr.calendar import HORIZON_DAYS
from celery_hashbeat.expr.localdays import LocalDays
from celery_hashbeat.expr.slots import CalendarSlots

if TYPE_CHECKING:
    from celery_hashbeat.entries.entry import Entry

#: The most of the schedule's own slots put to the calendar per question, so that a view of a
#: dense schedule (every second, over a long holiday) stays cheap.
CALENDAR_LOOK = 1000

#: The most left-out slots a view lists (it counts them all, up to CALENDAR_LOOK).
LISTED = 10


@dataclass(frozen=True)
class Fates:
    """What the calendar did to the schedule's own slots in a span: the first LISTED it left
    out, how many it left out and how many it moved (CALENDAR_LOOK slots looked at, at most)."""

    left_out: list[int] = field(default_factory=list)
    left_out_count: int = 0
    moved_count: int = 0


def calendar_of(entry: Entry | None) -> CalendarSlots | None:
    """The calendar an entry's slots go through, if it has one."""
    source = None if entry is None else entry.source
    source = source.inner if isinstance(source, BoundedSlots) else source
    return source if isinstance(source, CalendarSlots) else None


def fates(entry: Entry | None, since_ms: int, until_ms: int) -> Fates:
    """What the calendar of ``entry`` does to the schedule's own slots after ``since_ms`` and
    before ``until_ms``."""
    calendar = calendar_of(entry)
    if calendar is None:
        return Fates()
    left_out: list[int] = []
    count = moved = 0
    slot = calendar.inner.next_after(since_ms)
    for _ in range(CALENDAR_LOOK):
        if slot >= until_ms:
            break
        fate = calendar.fate(slot)
        if fate is None:
            count += 1
            if len(left_out) < LISTED:
                left_out.append(slot)
        elif fate != slot:
            moved += 1
        slot = calendar.inner.next_after(slot)
    return Fates(left_out, count, moved)


def moved_from(entry: Entry | None, slots: Iterable[int]) -> dict[int, list[int]]:
    """For each of ``slots`` (as the entry's plan has them) that its calendar moved slots of
    excluded days onto, those slots, oldest first (several land on one instant when a run of
    excluded days ends, as ``hashbeat explain`` shows)."""
    calendar = calendar_of(entry)
    if calendar is None or calendar.mode == "skip":
        return {}
    step = 1 if calendar.mode == "next_business_day" else -1
    excluded, inner, days_of = calendar.calendar.excluded, calendar.inner, LocalDays(calendar.tz)
    wanted = set(slots)
    found: dict[int, list[int]] = {}
    for day in sorted({days_of.day_of(slot) for slot in wanted}):
        # The excluded days that give their slots to ``day``: the run of them next to it.
        days: list[int] = []
        while excluded(day - step * (len(days) + 1)) and len(days) < HORIZON_DAYS:
            days.append(day - step * (len(days) + 1))
        if not days:
            continue
        slot = inner.next_after(days_of.day_start(min(days)) - 1)
        end = days_of.day_start(max(days) + 1)
        for _ in range(CALENDAR_LOOK):
            if slot >= end:
                break
            fate = calendar.fate(slot)
            if fate is not None and fate in wanted:
                found.setdefault(fate, []).append(slot)
            slot = inner.next_after(slot)
    return found
