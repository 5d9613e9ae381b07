"""Fuzzing the parser with text over the grammar's own alphabet.

Whatever comes in, only CronSyntaxError may escape ``parse``, its caret stays inside the text,
and ``next()`` on anything accepted answers (or raises NoFireTimeError) in bounded time. When
the oracle also reads the text, the two agree on the next fire.
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime, timezone

from hypothesis import example, given
from hypothesis import strategies as st

from celery_hashbeat.expr import CronExpr, CronSyntaxError, NoFireTimeError, parse
from tests.expr import oracle
from tests.expr.strategies import expression_text

NAME_LETTERS = sorted(set("".join(oracle.MONTH_NAMES + oracle.DAY_NAMES)))
ALPHABET = "0123456789*?,-/#()[]HLW@ \t" + "".join(NAME_LETTERS) + "".join(NAME_LETTERS).lower()
TOKENS = [
    *"0123456789",
    "*",
    "?",
    ",",
    "-",
    "/",
    "#",
    "(",
    ")",
    "[",
    "]",
    "H",
    "L",
    "W",
    "LW",
    "@",
    "60",
    "31",
    "7",
    "0",
    "JAN",
    "mon",
    "FRI",
    "DEC",
    "@daily",
    "@weekly",
    "@yearly",
    "@reboot",
]
START = datetime(2026, 3, 7, 12, 34, 56, tzinfo=timezone.utc)
#: "Bounded time" made concrete, generously: a liveness check, not a benchmark.
TIME_LIMIT = 2.0

raw_text = st.text(alphabet=ALPHABET, max_size=40)
field_like = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=5).map("".join)
token_text = st.lists(field_like, min_size=1, max_size=7).map(" ".join)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A valid expression with one character inserted, deleted or replaced."""
    text = draw(expression_text())
    i = draw(st.integers(0, len(text)))
    op = draw(st.sampled_from(["insert", "delete", "replace"]))
    ch = draw(st.sampled_from(ALPHABET))
    if op == "insert":
        return text[:i] + ch + text[i:]
    if op == "delete":
        return text[:i] + text[i + 1 :]
    return text[:i] + ch + text[i + 1 :]


texts = st.one_of(raw_text, token_text, mutated())


def try_parse(text: str) -> CronExpr | None:
    """parse(), with every exception but CronSyntaxError left to fail the test."""
    try:
        return parse(text, "fuzz-key", tz="Europe/Riga")
    except CronSyntaxError as err:
        assert isinstance(err, ValueError)
        assert err.expression == text
        assert 0 <= err.start < err.end <= len(text) + 1, (err.start, err.end, text)
        assert err.message
        assert str(err).startswith(err.message)
        return None


@given(texts)
def test_only_syntax_errors_escape_and_next_is_bounded(text: str) -> None:
    """Accepted or refused cleanly; accepted means next() answers quickly."""
    expr = try_parse(text)
    if expr is None:
        return
    started = time.perf_counter()
    try:
        got: int | None = int(expr.next(START).timestamp())
    except NoFireTimeError:
        got = None
    assert time.perf_counter() - started < TIME_LIMIT, f"next() on {text!r} took too long"
    started = time.perf_counter()
    with contextlib.suppress(NoFireTimeError):
        expr.prev(START)
    assert time.perf_counter() - started < TIME_LIMIT, f"prev() on {text!r} took too long"
    try:
        spec = oracle.parse(text, "fuzz-key")
    except oracle.OracleParseError:
        return  # outside the oracle's strict grammar: nothing more to compare
    tz = oracle.zone("Europe/Riga")
    horizon = 40 * 86400
    want = oracle.next_fire(spec, tz, START.timestamp(), horizon)
    if want is None:
        assert got is None or got > START.timestamp() + horizon
    else:
        assert got == want, f"{text!r}: engine {got}, oracle {want}"


@given(texts)
@example("0 0 1 1 h")  # a lower-case H, which the oracle once refused (syntax.md: any case)
def test_engine_accepts_no_more_than_the_grammar(text: str) -> None:
    """Anything the engine accepts is in the §2 grammar as the oracle reads it."""
    expr = try_parse(text)
    if expr is not None:
        try:
            oracle.parse(text, "fuzz-key")
        except oracle.OracleParseError as err:
            raise AssertionError(f"engine accepted {text!r}; the §2 grammar says: {err}") from err


@given(expression_text())
def test_grammar_texts_are_accepted(text: str) -> None:
    """...and everything the grammar generator makes, the engine accepts."""
    assert try_parse(text) is not None
