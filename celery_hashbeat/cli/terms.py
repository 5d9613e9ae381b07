"""Expressions as written, field by field: what lint reads and what spread rewrites.

The engine resolves an expression to values; these helpers look at how each field was *written*
(a literal, a step, a hash term), which the values no longer show. They reuse the grammar's own
patterns and are only given expressions the engine has already accepted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from celery.schedules import crontab

from celery_hashbeat.expr.fields import FIVE_FIELDS, NAMES, SIX_FIELDS, Field
from celery_hashbeat.expr.grammar import ALIASES, FIELD_TEXT, HASH, RANGE, STAR


@dataclass(frozen=True)
class FieldText:
    """One field of an expression: which field, and its comma-separated terms (upper case)."""

    field: Field
    terms: tuple[str, ...]

    @property
    def text(self) -> str:
        return ",".join(self.terms)


@dataclass(frozen=True)
class Stepped:
    """A term that steps through a range (``*/15``, ``H/15``, ``10-50/20``): the range, the step,
    and every start it may take (one, or ``step`` of them for a hash term)."""

    low: int
    high: int
    step: int
    starts: range
    hashed: bool

    def runs(self, start: int, limit: int | None = None) -> list[int]:
        """The values from ``start``, stopping at the range's top or at ``limit``."""
        top = self.high if limit is None else min(self.high, limit)
        return list(range(start, top + 1, self.step))


def fields_of(expression: str) -> list[FieldText]:
    """The fields of an accepted expression, aliases expanded."""
    text = expression.strip(" \t")
    if text.startswith("@"):
        text = ALIASES[text.lower()]
    tokens = FIELD_TEXT.findall(text)
    layout = SIX_FIELDS if len(tokens) == 6 else FIVE_FIELDS
    return [
        FieldText(field, tuple(token.upper().split(",")))
        for field, token in zip(layout, tokens, strict=True)
    ]


def number(field: Field, text: str) -> int:
    """A bound as written: digits, or a month or weekday name."""
    return int(text) if text.isdigit() else NAMES[field][text]


def literal(field: Field, term: str) -> int | None:
    """The value of a term that is one plain value (``0``, ``MON``), else None."""
    match = None if is_hash(term) else RANGE.fullmatch(term)
    if match and not match["b"] and not match["step"]:
        return number(field, match["a"])
    return None


def stepped(field: Field, term: str) -> Stepped | None:
    """The range and step of a stepping term, or None for any other term."""
    if (match := STAR.fullmatch(term)) and match["step"]:
        step = int(match["step"])
        return Stepped(field.low, field.high, step, range(field.low, field.low + 1), False)
    if (match := HASH.fullmatch(term)) and match["step"]:
        low_text, high_text = match["a"] or match["c"], match["b"] or match["d"]
        if low_text is None:
            low, high = field.low, field.hash_high
        else:
            low, high = number(field, low_text), number(field, high_text)
        step = int(match["step"])
        return Stepped(low, high, step, range(low, min(low + step, high + 1)), True)
    if (match := RANGE.fullmatch(term)) and match["step"]:
        low = number(field, match["a"])
        high = number(field, match["b"]) if match["b"] else field.high
        return Stepped(low, high, int(match["step"]), range(low, low + 1), False)
    return None


def is_hash(term: str) -> bool:
    return HASH.fullmatch(term) is not None


def lowest(expression: str) -> str:
    """The expression with every hash term at its lowest value: what plain cron would run.

    ``H`` becomes the field's low (0, or 1 for day-of-month), ``H(a-b)`` becomes ``a``, ``H/n``
    becomes ``*/n`` (``1-28/n`` in day-of-month, ``0-6/n`` in day-of-week, the ranges ``H/n``
    draws from), ``H(a-b)/n`` becomes ``a-b/n``; the ``#`` spellings alike. Other terms stay.
    """
    return " ".join(
        ",".join(_lowest_term(field.field, term) for term in field.terms)
        for field in fields_of(expression)
    )


def _lowest_term(field: Field, term: str) -> str:
    match = HASH.fullmatch(term)
    if match is None:
        return term
    low, high, step = match["a"] or match["c"], match["b"] or match["d"], match["step"]
    if low is not None:
        return f"{low}-{high}/{step}" if step else low
    if not step:
        return str(field.low)
    return f"*/{step}" if field.hash_high == field.high else f"{field.low}-{field.hash_high}/{step}"


def crontab_text(schedule: crontab) -> str:
    """A crontab's fields as written, in cron order."""

    def written(value: Any) -> str:
        if isinstance(value, str | int):
            return str(value)
        return ",".join(str(v) for v in sorted(value))

    fields = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
    return " ".join(written(getattr(schedule, f"_orig_{name}")) for name in fields)
