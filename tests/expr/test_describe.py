"""describe(): one English sentence a user can check a schedule against (docs/design.md §4).

The wording is the engine's to choose; these tests pin what any faithful sentence must carry:
the time of day, the named days and months, the special days, and different sentences for
expressions that mean different things.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given

from celery_hashbeat.expr import parse
from tests.expr.strategies import Case, cases

KEY = "describe-me"


def describe(text: str, *, day_and: bool = False) -> str:
    return parse(text, KEY, day_and=day_and).describe()


def mentions_time(sentence: str, hour: int, minute: int) -> bool:
    """14:30, 2:30 PM and 2:30 pm all name the same time."""
    twelve = hour % 12 or 12
    suffix = "AM" if hour < 12 else "PM"
    candidates = [
        f"{hour:02d}:{minute:02d}",
        f"{hour}:{minute:02d}",
        f"{twelve}:{minute:02d} {suffix}",
    ]
    low = sentence.lower()
    return any(c.lower() in low for c in candidates)


@pytest.mark.parametrize(
    ("text", "hour", "minute"),
    [
        ("30 14 * * *", 14, 30),
        ("0 9 * * 1-5", 9, 0),
        ("5 0 * * *", 0, 5),
        ("59 23 31 12 *", 23, 59),
    ],
)
def test_fixed_times_are_named(text: str, hour: int, minute: int) -> None:
    assert mentions_time(describe(text), hour, minute)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("0 9 * * 1-5", ["Monday", "Friday"]),
        ("0 0 * * 0", ["Sunday"]),
        ("0 0 * * 7", ["Sunday"]),
        ("0 0 * * SAT", ["Saturday"]),
        ("0 0 1 JAN *", ["January"]),
        ("0 0 1 jul-aug *", ["July", "August"]),
        ("0 0 L * *", ["last"]),
        ("0 0 LW * *", ["last", "weekday"]),
        ("0 0 * * 5L", ["last", "Friday"]),
        ("0 0 * * 1#2", ["Monday"]),
        ("0 0 15W * *", ["15", "weekday"]),
        ("* * * * *", ["minute"]),
        ("* * * * * *", ["second"]),
        ("*/15 * * * *", ["15"]),
    ],
)
def test_days_months_and_specials_are_named(text: str, words: list[str]) -> None:
    sentence = describe(text)
    for word in words:
        assert word.lower() in sentence.lower(), f"{text!r}: {sentence!r} lacks {word!r}"


def test_nth_weekday_says_which() -> None:
    """'1#2' is the second Monday, not any Monday."""
    sentence = describe("0 0 * * 1#2").lower()
    assert "second" in sentence or "2nd" in sentence


DISTINCT = [
    "* * * * *",
    "*/15 * * * *",
    "0 * * * *",
    "0 0 * * *",
    "30 2 * * *",
    "0 9-17/2 * * 1-5",
    "0 0 29 2 *",
    "0 0 1,15 * 1",
    "0 0 1,15 * *",
    "0 0 * * 1",
    "59 23 31 12 *",
    "0 0 L * *",
    "0 0 LW * *",
    "0 0 * * 5L",
    "0 0 * * 1#2",
    "0 0 * * 1#3",
    "0 0 15W * *",
    "0 0 * * 0",
    "* * * * * *",
    "*/10 * * * * *",
    "30 0 0 1 1 *",
    "0 0 1 1 *",
]


def test_different_schedules_get_different_sentences() -> None:
    sentences = {text: describe(text) for text in DISTINCT}
    seen: dict[str, str] = {}
    for text, sentence in sentences.items():
        assert sentence not in seen, f"{text!r} and {seen.get(sentence)!r} both say {sentence!r}"
        seen[sentence] = text


def test_day_and_changes_the_sentence() -> None:
    """OR (Vixie) and AND (day_and=True) fire on different days: the sentences must differ."""
    assert describe("0 0 1,15 * 1") != describe("0 0 1,15 * 1", day_and=True)


@given(cases())
def test_any_expression_gets_one_clean_sentence(case: Case) -> None:
    """A non-empty single line starting with a capital, without hash syntax or Python reprs."""
    expr = parse(case.text, case.key, tz=case.tz_arg, day_and=case.day_and)
    sentence = expr.describe()
    assert isinstance(sentence, str)
    assert sentence.strip()
    assert "\n" not in sentence
    assert sentence[0].isupper()
    assert not re.search(r"\bH\b|H\(|None|\{|\[|<", sentence), sentence


def test_hashed_times_are_described_resolved() -> None:
    """'@daily' says the time it actually fires at, the one str() shows."""
    for i in range(50):
        expr = parse("@daily", f"nightly-{i}")
        minute, hour = map(int, str(expr).split()[:2])
        assert mentions_time(expr.describe(), hour, minute), (str(expr), expr.describe())


@pytest.mark.parametrize(
    ("text", "repeats", "not_said"),
    [
        ("15,45 * * * * *", "every minute", "every hour"),  # fires twice a minute
        ("0,30 * * * * *", "every minute", "every hour"),
        ("15,45 5 * * * *", "every hour", "every minute"),  # only in minute 5
        ("0 0 * * * *", "every hour", "every minute"),
    ],
)
def test_a_list_of_seconds_says_how_often_it_repeats(
    text: str, repeats: str, not_said: str
) -> None:
    sentence = describe(text)
    assert repeats in sentence and not_said not in sentence, sentence
