"""Text to a template: the grammar of docs/design.md §2, with errors that point at the fault.

Each field is a comma list of terms. Plain terms become values at once; hash terms are kept as
descriptions, so that the same text read for a hundred thousand keys is parsed once and only its
hash draws are made per key (resolve.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NoReturn

from celery_hashbeat.expr.errors import CronSyntaxError
from celery_hashbeat.expr.fields import FIVE_FIELDS, NAMES, SIX_FIELDS, Field

MAX_LENGTH = 1000
ALLOWED = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ*?,-/#()[]@ \t")

ALIASES = {
    "@yearly": "H H H H *",
    "@annually": "H H H H *",
    "@monthly": "H H H * *",
    "@weekly": "H H * * H",
    "@daily": "H H * * *",
    "@midnight": "H H(0-2) * * *",
    "@hourly": "H * * * *",
}

STAR = re.compile(r"[*?](?:/(?P<step>[0-9]+))?")
HASH = re.compile(
    r"(?:H(?:\((?P<a>[0-9A-Z]+)-(?P<b>[0-9A-Z]+)\))?|#(?:\[(?P<c>[0-9A-Z]+)-(?P<d>[0-9A-Z]+)\])?)"
    r"(?:/(?P<step>[0-9]+))?"
)
RANGE = re.compile(r"(?P<a>[0-9A-Z]+)(?:-(?P<b>[0-9A-Z]+))?(?:/(?P<step>[0-9]+))?")
NEAREST_WEEKDAY = re.compile(r"(?P<a>[0-9]+)W")
LAST_WEEKDAY_OF = re.compile(r"(?P<a>[0-9A-Z]+)L")
NTH_WEEKDAY = re.compile(r"(?P<a>[0-9A-Z]+)#(?P<k>[0-9]+)")
FIELD_TEXT = re.compile(r"[^ \t]+")


@dataclass(frozen=True, slots=True)
class HashTerm:
    """A hash term as written: its value range, step (0: a single value) and place."""

    text: str
    start: int
    low: int
    high: int
    step: int
    occurrence: int


@dataclass(frozen=True, slots=True)
class FieldTemplate:
    """One field: the values of its plain terms, its hash terms, and its text in parts."""

    field: Field
    written: str
    plain_text: str
    values: frozenset[int]
    parts: tuple[str | HashTerm, ...]
    hashes: tuple[HashTerm, ...]
    last_day: bool
    last_weekday: bool
    nearest_weekdays: frozenset[int]
    last_weekdays_of: frozenset[int]
    nth_weekdays: frozenset[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed expression before its key is known."""

    expression: str
    fields: tuple[FieldTemplate, ...]
    alias: str | None

    def field(self, which: Field) -> FieldTemplate | None:
        return next((f for f in self.fields if f.field is which), None)

    @property
    def first_hash(self) -> tuple[FieldTemplate, HashTerm] | None:
        return next(((f, f.hashes[0]) for f in self.fields if f.hashes), None)


@dataclass
class _FieldValues:
    values: set[int] = field(default_factory=set)
    parts: list[str | HashTerm] = field(default_factory=list)
    hashes: list[HashTerm] = field(default_factory=list)
    last_day: bool = False
    last_weekday: bool = False
    nearest_weekdays: set[int] = field(default_factory=set)
    last_weekdays_of: set[int] = field(default_factory=set)
    nth_weekdays: set[tuple[int, int]] = field(default_factory=set)

    def freeze(self, field_: Field, written: str) -> FieldTemplate:
        plain = "" if self.hashes else ",".join(p for p in self.parts if isinstance(p, str))
        return FieldTemplate(
            field_,
            written,
            plain,
            frozenset(self.values),
            tuple(self.parts),
            tuple(self.hashes),
            self.last_day,
            self.last_weekday,
            frozenset(self.nearest_weekdays),
            frozenset(self.last_weekdays_of),
            frozenset(self.nth_weekdays),
        )


class _Term:
    """One term's text and where it stands, so every error can put a caret under its fault."""

    def __init__(self, expression: str, field_: Field, start: int, text: str) -> None:
        self.expression = expression
        self.field = field_
        self.start = start
        #: As the user wrote it, for messages; ``text`` is upper-cased for matching.
        self.written = text
        self.text = text.upper()

    def fail(self, message: str, offset: int = 0, length: int | None = None) -> NoReturn:
        begin = self.start + offset
        end = begin + (length if length is not None else len(self.text) - offset)
        raise CronSyntaxError(message, self.expression, begin, end, self.field.label)

    def group_fail(self, match: re.Match[str], group: str, message: str) -> NoReturn:
        self.fail(message, match.start(group), match.end(group) - match.start(group))


def parse_template(expression: str) -> Template:
    """Parse a whole expression or alias; raises CronSyntaxError for anything else."""
    if len(expression) > MAX_LENGTH:
        raise CronSyntaxError(
            f"the expression is {len(expression)} characters long; at most {MAX_LENGTH} are "
            "accepted (a cron expression has 5 or 6 short fields)"
        )
    for position, char in enumerate(expression):
        if char not in ALLOWED:
            field_ = _field_at(expression, position)
            where = f" in the {field_.label} field" if field_ else ""
            raise CronSyntaxError(
                f"unexpected character {char!r}{where}: fields hold ASCII digits, names, and "
                "* ? , - / # ( ) [ ] H L W, separated by spaces",
                expression,
                position,
                position + 1,
                field_.label if field_ else None,
            )
    stripped = expression.strip(" \t")
    if not stripped:
        raise CronSyntaxError(
            "the expression is empty: give 5 fields (minute hour day-of-month month day-of-week), "
            "6 with seconds first, or an alias such as @daily",
            expression,
        )
    if stripped.startswith("@"):
        return _parse_alias(expression, stripped)
    return _parse_fields(expression)


def _field_at(expression: str, position: int) -> Field | None:
    """The field that holds ``position``, when the expression has a field count that says so."""
    tokens = list(FIELD_TEXT.finditer(expression))
    if len(tokens) not in (5, 6):
        return None
    layout = SIX_FIELDS if len(tokens) == 6 else FIVE_FIELDS
    return next(
        (f for f, m in zip(layout, tokens, strict=True) if m.start() <= position < m.end()), None
    )


def _parse_alias(expression: str, alias: str) -> Template:
    start = expression.index(alias)
    expansion = ALIASES.get(alias.lower())
    if expansion is None:
        raise CronSyntaxError(
            f"unknown alias {alias!r}: use one of {', '.join(ALIASES)}",
            expression,
            start,
            start + len(alias),
        )
    return Template(expression, _parse_fields(expansion).fields, alias)


def _parse_fields(expression: str) -> Template:
    tokens = list(FIELD_TEXT.finditer(expression))
    if len(tokens) not in (5, 6):
        extra = tokens[6:] if len(tokens) > 6 else []
        start, end = (extra[0].start(), len(expression)) if extra else (0, len(expression))
        raise CronSyntaxError(
            f"expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds "
            f"first), found {len(tokens)}",
            expression,
            start,
            end,
        )
    layout = SIX_FIELDS if len(tokens) == 6 else FIVE_FIELDS
    fields = tuple(
        _parse_field(expression, f, m.start(), m.group()).freeze(f, m.group())
        for f, m in zip(layout, tokens, strict=True)
    )
    return Template(expression, fields, None)


def _parse_field(expression: str, field_: Field, start: int, text: str) -> _FieldValues:
    result = _FieldValues()
    offset = 0
    for part in text.split(","):
        term = _Term(expression, field_, start + offset, part)
        if not part:
            term.fail(f"empty term in the {field_.label} list: remove the extra comma", 0, 1)
        _parse_term(term, result)
        offset += len(part) + 1
    return result


def _parse_term(term: _Term, into: _FieldValues) -> None:
    text, field_ = term.text, term.field
    if match := STAR.fullmatch(text):
        if text[0] == "?" and field_ not in (Field.DAY_OF_MONTH, Field.DAY_OF_WEEK):
            term.fail(
                f"'?' is only accepted in day-of-month and day-of-week, "
                f"not in {field_.label}: use *"
            )
        if text[0] == "?" and match["step"]:
            term.fail(f"'?' takes no step in {field_.label}: write *{text[1:]}")
        step = _step(term, match, field_.size) if match["step"] else 1
        _add_range(into, field_.low, field_.high, step, term.text)
    elif match := HASH.fullmatch(text):
        _add_hash(term, match, into)
    elif field_ is Field.DAY_OF_MONTH and text in ("L", "LW"):
        into.last_day |= text == "L"
        into.last_weekday |= text == "LW"
        into.parts.append(text)
    elif field_ is Field.DAY_OF_MONTH and (match := NEAREST_WEEKDAY.fullmatch(text)):
        into.nearest_weekdays.add(_value(term, match, "a"))
        into.parts.append(text)
    elif field_ is Field.DAY_OF_WEEK and (match := LAST_WEEKDAY_OF.fullmatch(text)):
        into.last_weekdays_of.add(_value(term, match, "a") % 7)
        into.parts.append(text)
    elif field_ is Field.DAY_OF_WEEK and (match := NTH_WEEKDAY.fullmatch(text)):
        weekday, nth = _value(term, match, "a") % 7, int(match["k"])
        if not 1 <= nth <= 5:
            term.group_fail(match, "k", f"day-of-week occurrence #{match['k']} is out of range 1-5")
        into.nth_weekdays.add((weekday, nth))
        into.parts.append(text)
    elif match := RANGE.fullmatch(text):
        low = _value(term, match, "a")
        high = _value(term, match, "b") if match["b"] else (field_.high if match["step"] else low)
        _check_order(term, match, low, high)
        step = (
            _step(term, match, high - low + 1 if match["b"] else field_.size)
            if match["step"]
            else 1
        )
        _add_range(into, low, high, step, term.text)
    else:
        term.fail(_unknown_term_message(field_, term.written))


def _unknown_term_message(field_: Field, text: str) -> str:
    specials = {
        Field.DAY_OF_MONTH: ", L, LW, nW",
        Field.DAY_OF_WEEK: ", nL, n#k",
    }.get(field_, "")
    return (
        f"cannot read {text!r} in the {field_.label} field: expected *, N, a-b, */n, a-b/n, N/n, "
        f"H, H(a-b), H/n, H(a-b)/n{specials}"
    )


def _add_range(into: _FieldValues, low: int, high: int, step: int, text: str) -> None:
    into.values.update(range(low, high + 1, step))
    into.parts.append(text)


def _add_hash(term: _Term, match: re.Match[str], into: _FieldValues) -> None:
    field_ = term.field
    bounded = match["a"] is not None or match["c"] is not None
    if bounded:
        low_group, high_group = ("a", "b") if match["a"] is not None else ("c", "d")
        low, high = _value(term, match, low_group), _value(term, match, high_group)
        _check_order(term, match, low, high, low_group, high_group)
    else:
        low, high = field_.low, field_.hash_high
    step = _step(term, match, high - low + 1) if match["step"] else 0
    hashed = HashTerm(term.text, term.start, low, high, step, len(into.hashes))
    into.hashes.append(hashed)
    into.parts.append(hashed)


def _value(term: _Term, match: re.Match[str], group: str) -> int:
    field_, text = term.field, match[group]
    if text.isdigit():
        number = int(text) if len(text) <= 4 else 10**4
        if not field_.low <= number <= field_.high:
            term.group_fail(
                match,
                group,
                f"{field_.label} value {text} is out of range {field_.low}-{field_.high}",
            )
        return number
    names = NAMES.get(field_)
    if names is None:
        term.group_fail(
            match, group, f"{text!r} is not a number; the {field_.label} field takes numbers"
        )
    if text not in names:
        first, last = next(iter(names)), list(names)[-1]
        term.group_fail(
            match, group, f"unknown {field_.label} name {text!r}: use {first}-{last} or numbers"
        )
    return names[text]


def _check_order(
    term: _Term,
    match: re.Match[str],
    low: int,
    high: int,
    low_group: str = "a",
    high_group: str = "b",
) -> None:
    if low > high:
        hint = (
            " (Sunday is both 0 and 7: write 6-7 for SAT-SUN)"
            if term.field is Field.DAY_OF_WEEK
            else ""
        )
        begin, end = match.start(low_group), match.end(high_group)
        term.fail(
            f"reversed range {match[low_group]}-{match[high_group]} in {term.field.label}: write "
            f"the smaller value first{hint}",
            begin,
            end - begin,
        )


def _step(term: _Term, match: re.Match[str], limit: int) -> int:
    text = match["step"]
    step = int(text) if len(text) <= 4 else 10**4
    if step < 1:
        term.group_fail(match, "step", f"step {text} in {term.field.label} must be at least 1")
    if step > limit:
        term.group_fail(
            match,
            "step",
            f"step {text} in {term.field.label} is larger than the {limit} values it steps over",
        )
    return step
