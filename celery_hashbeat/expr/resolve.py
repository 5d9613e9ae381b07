"""A template and a key to plain values: the hash draws of docs/design.md §3, made per key.

A Resolver is made once per expression text and does everything that does not depend on the key
up front, so resolving a key is its hash draws and a lookup. Results are interned by the hash
terms' offsets (each value counted from its term's low end), found before any text is made: a
million keys of ``H * * * *`` share sixty resolved expressions, and the balancer's placed
schedules, which give the offsets, find the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import cast

from celery_hashbeat.expr.days import can_ever_fire
from celery_hashbeat.expr.errors import CronSyntaxError
from celery_hashbeat.expr.fields import DaySpec, Field, Resolved
from celery_hashbeat.expr.grammar import FieldTemplate, HashTerm, Template, parse_template
from celery_hashbeat.expr.seeding import Key, drawn, key_bytes, term_bytes
from celery_hashbeat.expr.timing import WallClock

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
        "_draws",
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
        self._interned: dict[tuple[tuple[int, ...], bool], Parsed] = {}
        self._needs_key = template.first_hash is not None
        #: Each field's text with no key (what a field without hash terms always is), and the
        #: fields with hash terms, each term with what follows the key in its draws: a key
        #: redraws only those.
        self._plain = [written.plain_text for written in template.fields]
        self._hashed = [
            (i, written, [(term, _seed(written, term)) for term in written.hashes])
            for i, written in enumerate(template.fields)
            if written.hashes
        ]
        #: Each hash term, left to right: what follows the key in its draw, and how many values
        #: (or starts, for a stepped term) it draws among.
        self._draws = [
            (suffix, term.step or term.high - term.low + 1)
            for _, _, terms in self._hashed
            for term, suffix in terms
        ]

    def resolve(
        self, key: Key | None, day_and: bool, offsets: tuple[int, ...] | None = None
    ) -> Parsed:
        """Draw the hash terms for ``key``, or take them from ``offsets`` (one per hash term,
        left to right, each counted from the term's low end: the balancer's choice); raises
        CronSyntaxError if a key is needed and missing. A key's draws are its offsets, looked up
        before any text or value set is made: at a million keys, most were seen before."""
        if offsets is None:
            if key is None:
                if self._needs_key:
                    _missing_key(self.template)
                offsets = ()
            else:
                material = key_bytes(key)
                offsets = tuple([drawn(material + suffix) % count for suffix, count in self._draws])
        found = self._interned.get((offsets, day_and))
        if found is None:
            found = self._interned[offsets, day_and] = self._placed(offsets, day_and)
        return found

    def _placed(self, offsets: tuple[int, ...], day_and: bool) -> Parsed:
        """The expression with its hash terms at ``offsets``."""
        given = iter(offsets)
        texts = self._plain.copy()
        values = [written.values for written in self.template.fields]
        for i, written, terms in self._hashed:
            chosen = [_place(term, next(given)) for term, _ in terms]
            texts[i] = _field_text(written.parts, chosen)
            values[i] = written.values.union(*chosen)
        return self._build(values, " ".join(texts), day_and)

    def _build(self, chosen: list[frozenset[int]], text: str, day_and: bool) -> Parsed:
        values = dict(zip((written.field for written in self.template.fields), chosen, strict=True))
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


def _field_text(parts: tuple[str | HashTerm, ...], terms: list[range]) -> str:
    """A field's text with its hash terms replaced by the values drawn for them."""
    if len(parts) == 1:  # the field is one hash term, as in nearly every expression
        return _render(terms[0], cast(HashTerm, parts[0]).step)
    drawn = iter(terms)
    return ",".join(
        _render(next(drawn), part.step) if isinstance(part, HashTerm) else part for part in parts
    )


def _seed(written: FieldTemplate, term: HashTerm) -> bytes:
    return term_bytes(written.field.seed_name, term.occurrence)


def _place(term: HashTerm, offset: int) -> range:
    """The values of ``term`` at ``offset`` from its low end (a start, for a stepped term)."""
    first = term.low + offset
    return range(first, term.high + 1, term.step) if term.step else range(first, first + 1)


def _render(values: range, step: int) -> str:
    if len(values) == 1:
        return str(values.start)
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
