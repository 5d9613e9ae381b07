"""A template and a key to plain values: the hash draws of DESIGN.md §3, made per key.

A Resolver is made once per expression text and does everything that does not depend on the key
up front, so resolving a key is its hash draws and a lookup. Results are interned by their
resolved text: a hundred thousand keys of ``H * * * *`` share sixty resolved expressions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import cast

from .days import can_ever_fire
from .errors import CronSyntaxError
from .fields import DaySpec, Field, Resolved
from .grammar import FieldTemplate, HashTerm, Template, parse_template
from .seeding import Key, pick
from .timing import WallClock

ZERO = frozenset({0})


@dataclass(frozen=True, slots=True)
class Parsed:
    """What evaluation needs; equal when the resolved text and the rules that read it are."""

    resolved_text: str
    six_fields: bool
    fixed_time: bool
    day_and: bool
    resolved: Resolved = field(compare=False)
    wall: WallClock = field(compare=False)


@lru_cache(maxsize=1024)
def resolver_for(expression: str) -> Resolver:
    return Resolver(parse_template(expression))


class Resolver:
    """Resolves one template for any key."""

    __slots__ = (
        "_day_fields",
        "_fixed_time",
        "_hashed",
        "_interned",
        "_needs_key",
        "_plain",
        "_six",
        "template",
    )

    def __init__(self, template: Template) -> None:
        self.template = template
        self._six = len(template.fields) == 6
        by_field = {written.field: written for written in template.fields}
        minute, hour = by_field[Field.MINUTE], by_field[Field.HOUR]
        self._fixed_time = not self._six and minute.written[0] != "*" and hour.written[0] != "*"
        self._day_fields = (by_field[Field.DAY_OF_MONTH], by_field[Field.DAY_OF_WEEK])
        self._interned: dict[tuple[str, bool], Parsed] = {}
        self._needs_key = template.first_hash is not None
        #: Each field's values and text with no key (what a field without hash terms always is),
        #: and where the fields with hash terms are: a key redraws only those.
        self._plain = [(written.values, written.plain_text) for written in template.fields]
        self._hashed = [i for i, written in enumerate(template.fields) if written.hashes]

    def resolve(
        self, key: Key | None, day_and: bool, offsets: tuple[int, ...] | None = None
    ) -> Parsed:
        """Draw the hash terms for ``key``, or take them from ``offsets`` (one per hash term,
        left to right, each counted from the term's low end: the balancer's choice); raises
        CronSyntaxError if a key is needed and missing."""
        if key is None and offsets is None and self._needs_key:
            _missing_key(self.template)
        drawn = self._plain
        if key is not None or offsets is not None:
            given = None if offsets is None else iter(offsets)
            drawn = drawn.copy()
            fields = self.template.fields
            for i in self._hashed:
                drawn[i] = _draw_field(fields[i], key, given)
        text = " ".join([text for _, text in drawn])
        found = self._interned.get((text, day_and))
        if found is None:
            found = self._interned[text, day_and] = self._build(drawn, text, day_and)
        return found

    def _build(self, drawn: list[tuple[frozenset[int], str]], text: str, day_and: bool) -> Parsed:
        values = {
            written.field: chosen
            for written, (chosen, _) in zip(self.template.fields, drawn, strict=True)
        }
        dom, dow = self._day_fields
        day = DaySpec(
            days=values[Field.DAY_OF_MONTH],
            last_day=dom.last_day,
            last_weekday=dom.last_weekday,
            nearest_weekdays=dom.nearest_weekdays,
            weekdays=frozenset(v % 7 for v in values[Field.DAY_OF_WEEK]),
            last_weekdays_of=dow.last_weekdays_of,
            nth_weekdays=dow.nth_weekdays,
            both_must_match=day_and or dom.written[0] in "*?" or dow.written[0] in "*?",
        )
        resolved = Resolved(
            seconds=values.get(Field.SECOND, ZERO),
            minutes=values[Field.MINUTE],
            hours=values[Field.HOUR],
            months=values[Field.MONTH],
            day=day,
        )
        if not can_ever_fire(day, resolved.months):
            expression = self.template.expression
            raise CronSyntaxError(
                f"{expression.strip()!r} can never fire: no month has the day it asks for "
                "(check the day-of-month, month and day-of-week fields)",
                expression,
            )
        return Parsed(text, self._six, self._fixed_time, day_and, resolved, WallClock(resolved))


def _draw_field(
    written: FieldTemplate, key: Key | None, given: Iterator[int] | None
) -> tuple[frozenset[int], str]:
    """The field's values and resolved text for ``key``, or for the ``given`` offsets."""
    values = set(written.values)
    parts = []
    for part in written.parts:
        if isinstance(part, HashTerm):
            drawn = (
                _draw(part, written.field, cast(Key, key))
                if given is None
                else _place(part, next(given))
            )
            values.update(drawn)
            parts.append(_render(drawn, part.step))
        else:
            parts.append(part)
    return frozenset(values), ",".join(parts)


def _draw(term: HashTerm, field_: Field, key: Key) -> range:
    """DESIGN.md §3: ``H`` and ``H(a-b)`` draw a value, ``H/n`` and ``H(a-b)/n`` a start."""
    if term.step:
        first = pick(key, field_.seed_name, term.occurrence, term.low, term.step)
        return range(first, term.high + 1, term.step)
    value = pick(key, field_.seed_name, term.occurrence, term.low, term.high - term.low + 1)
    return range(value, value + 1)


def _place(term: HashTerm, offset: int) -> range:
    """The values of ``term`` at ``offset`` from its low end (a start, for a stepped term)."""
    first = term.low + offset
    return range(first, term.high + 1, term.step) if term.step else range(first, first + 1)


def _render(values: range, step: int) -> str:
    if len(values) <= 6:
        return ",".join(map(str, values))
    return f"{values[0]}-{values[-1]}/{step}"


def _missing_key(template: Template) -> None:
    found = template.first_hash
    assert found is not None
    written, term = found
    expression = template.expression
    if template.alias is not None:
        start = expression.index(template.alias)
        what, end, field_ = f"alias {template.alias}", start + len(template.alias), None
    else:
        start, end = term.start, term.start + len(term.text)
        what = f"the hash term {term.text!r} in the {written.field.label} field"
        field_ = written.field.label
    raise CronSyntaxError(
        f"{what} needs a key to hash: pass key=... (for example the job's name), or run the "
        "entry under celery_hashbeat.Scheduler, which keys it by its beat_schedule name",
        expression,
        start,
        end,
        field_,
    )
