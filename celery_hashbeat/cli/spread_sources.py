"""The slot sources ``hashbeat spread`` counts: each entry's as scheduled, with hash terms at
their lowest (what plain cron would do), as the key's hash alone gives them (pure), and
balanced (docs/design.md §16)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import tzinfo
from typing import TYPE_CHECKING

from celery_hashbeat.cli.spread_window import Sources
from celery_hashbeat.cli.terms import lowest
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.expr import CronExpr, parse
from celery_hashbeat.expr.balance import assign, terms_of
from celery_hashbeat.expr.slots import CalendarSlots, ChainSlots, CronSlots, IntervalSlots, Slots
from celery_hashbeat.schedules import hashcron, hashinterval

if TYPE_CHECKING:
    from celery import Celery


def _grouped(sources: Iterable[Slots | CronExpr]) -> Sources:
    """Entries that share a slot source, or resolve to the same expression, count once, weighted."""
    return [
        (CronSlots(source) if isinstance(source, CronExpr) else source, weight)
        for source, weight in Counter(sources).items()
    ]


def expression_sources(expression: str, keys: list[str], zone: tzinfo) -> tuple[Sources, Sources]:
    """Hashed and plain sources for one expression under many keys."""
    hashed = _grouped(parse(expression, key, tz=zone) for key in keys)
    plain: Sources = [(CronSlots(parse(lowest(expression), tz=zone)), len(keys))]
    return hashed, plain


def balanced_expression_sources(expression: str, keys: list[str], zone: tzinfo) -> Sources:
    """One expression under many keys, balanced as one group (docs/design.md §16)."""
    assigned = assign(keys, terms_of(expression))
    return _grouped(parse(expression, key, tz=zone, offsets=assigned[key]) for key in keys)


def pure_sources(app: Celery, entries: list[Entry]) -> Sources:
    """Every entry's slots with hash terms as the key's hash alone gives them."""
    pure: list[Slots | CronExpr] = []
    for entry in entries:
        given = entry.schedule
        if isinstance(given, hashcron) and given.offsets is not None:
            zone = given.zone if given.zone is not None else app.timezone
            key = given.key if given.key is not None else entry.name
            pure.append(parse(given.expr, key, tz=zone, day_and=given.day_and))
        else:
            pure.append(entry.source)
    return _grouped(pure)


def app_sources(app: Celery, entries: list[Entry]) -> tuple[Sources, Sources, bool]:
    """Hashed and plain sources for every entry, and whether any fires within a minute."""
    hashed: list[Slots] = []
    plain: list[Slots | CronExpr] = []
    unhashed: dict[int, IntervalSlots] = {}
    fine = False
    for entry in entries:
        outer, given = entry.source, entry.schedule
        hashed.append(outer)
        # A calendar (docs/design.md §20) applies to the plain cron reading too.
        calendar = outer if isinstance(outer, CalendarSlots) else None
        source = calendar.inner if calendar is not None else outer
        if isinstance(given, hashcron):
            zone = given.zone if given.zone is not None else app.timezone
            unwrapped: Slots = CronSlots(parse(lowest(given.expr), tz=zone, day_and=given.day_and))
        elif isinstance(source, IntervalSlots) and isinstance(given, hashinterval):
            unwrapped = unhashed.setdefault(source.period, IntervalSlots(source.period, 0))
        else:
            unwrapped = source
        if calendar is not None and unwrapped is not source:
            unwrapped = CalendarSlots(unwrapped, calendar.calendar, calendar.tz, calendar.mode)
        plain.append(outer if unwrapped is source else unwrapped)
        if isinstance(source, CronSlots):
            fine |= source.expr.has_seconds
        elif isinstance(source, IntervalSlots | ChainSlots):
            fine |= (source.period if isinstance(source, IntervalSlots) else source.every) < 60_000
    return _grouped(hashed), _grouped(plain), fine
