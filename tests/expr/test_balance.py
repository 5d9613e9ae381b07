"""Balanced spread (docs/design.md §16), as properties over sets of keys: the assignment depends on
the set alone, no slot holds more than ceil(N / slots) + 1, one change moves few others, and
nothing moves without a change. The pure values it starts from are checked against sha256 per
docs/design.md §3, computed here on their own, and whole assignments against ``balance_oracle``."""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from celery_hashbeat.expr import parse
from celery_hashbeat.expr.balance import assign, seeded, shape_of, terms_of

from . import balance_oracle

KEYS = st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=300, unique=True)
EXPRESSIONS = st.sampled_from(
    ["H * * * *", "0 H * * *", "H * * * * *", "H/15 * * * *", "H(0-9) H(1-3) * * *", "0 0 H * *"]
)


#: The hash terms of each expression above, as (field, occurrence, count), for the oracle.
ORACLE_TERMS = {
    "H * * * *": [("minute", 0, 60)],
    "0 H * * *": [("hour", 0, 24)],
    "H * * * * *": [("second", 0, 60)],
    "H/15 * * * *": [("minute", 0, 15)],
    "H(0-9) H(1-3) * * *": [("minute", 0, 10), ("hour", 0, 3)],
    "0 0 H * *": [("day_of_month", 0, 28)],
}


def slots_of(expression: str) -> int:
    return math.prod(term.count for term in terms_of(expression))


def minute_by_hand(key: str) -> int:
    digest = hashlib.sha256(key.encode() + b"\x1fminute\x1f0").digest()
    return int.from_bytes(digest[:8], "big") % 60


@given(KEYS, EXPRESSIONS, st.randoms(use_true_random=False))
@settings(max_examples=60, deadline=None)
def test_the_assignment_depends_on_the_set_not_the_order(
    keys: list[str], expression: str, rng: random.Random
) -> None:
    terms = terms_of(expression)
    shuffled = list(keys)
    rng.shuffle(shuffled)
    assert assign(keys, terms) == assign(shuffled, terms)


@given(KEYS, EXPRESSIONS)
@settings(max_examples=60, deadline=None)
def test_no_slot_holds_more_than_its_share_plus_one(keys: list[str], expression: str) -> None:
    terms = terms_of(expression)
    assigned = assign(keys, terms)
    assert set(assigned) == set(keys)
    for offsets, term in zip(zip(*assigned.values(), strict=True), terms, strict=True):
        assert all(0 <= offset < term.count for offset in offsets)
    peak = max(Counter(assigned.values()).values())
    assert peak <= math.ceil(len(keys) / slots_of(expression)) + 1


@given(KEYS, EXPRESSIONS)
@settings(max_examples=40, deadline=None)
def test_a_tight_group_deals_distinct_values_while_the_range_has_room(
    keys: list[str], expression: str
) -> None:
    terms = terms_of(expression)
    peak = max(Counter(assign(keys, terms, tight=True).values()).values())
    assert peak == math.ceil(len(keys) / slots_of(expression))


@given(KEYS, st.text(min_size=1, max_size=12), EXPRESSIONS)
@settings(max_examples=60, deadline=None)
def test_one_change_moves_few_others(keys: list[str], extra: str, expression: str) -> None:
    terms = terms_of(expression)
    before = assign(keys, terms)
    after = assign([*keys, extra] if extra not in keys else [k for k in keys if k != extra], terms)
    moved = [key for key in before.keys() & after.keys() if before[key] != after[key]]
    assert len(moved) <= 12, moved


@given(KEYS, EXPRESSIONS, st.booleans())
@settings(max_examples=30, deadline=None)
def test_the_assignment_is_the_one_the_docs_describe(
    keys: list[str], expression: str, tight: bool
) -> None:
    expected = balance_oracle.balanced(keys, ORACLE_TERMS[expression], tight)
    assert assign(keys, terms_of(expression), tight=tight) == expected


@pytest.mark.parametrize(("count", "expression"), [(120, "H * * * *"), (121, "H * * * *"),
                                                   (250, "0 H * * *")])  # fmt: skip
def test_the_capacities_the_docs_describe_at_and_past_a_multiple_of_the_slots(
    count: int, expression: str
) -> None:
    keys = [f"job-{n}" for n in range(count)]
    expected = balance_oracle.balanced(keys, ORACLE_TERMS[expression])
    assert assign(keys, terms_of(expression)) == expected


def test_the_sixty_reports_of_the_docs() -> None:
    """docs/seeding.md: four of report-0 ... report-59 move, report-37 from minute 12 to 15."""
    names = [f"report-{n}" for n in range(60)]
    expected = balance_oracle.balanced(names, ORACLE_TERMS["H * * * *"])
    assert assign(names, terms_of("H * * * *")) == expected
    moved = {name: expected[name][0] for name in names if expected[name][0] != minute_by_hand(name)}
    assert sorted(moved) == ["report-26", "report-37", "report-42", "report-9"]
    assert (minute_by_hand("report-37"), moved["report-37"]) == (12, 15)
    assert max(Counter(expected.values()).values()) == 2


def test_moves_stay_few_on_average_for_a_large_set() -> None:
    """Ten thousand keys over sixty minutes, twenty adds and removes (the benchmark measures
    more): a few others move per change, never dozens."""
    terms = terms_of("H * * * *")
    keys = [f"job-{n}" for n in range(10_000)]
    rng = random.Random(16)
    current = assign(keys, terms)
    moved = []
    for change in range(20):
        if change % 2:
            keys.remove(rng.choice(keys))
        else:
            keys.append(f"added-{change}")
        after = assign(keys, terms)
        moved.append(sum(1 for key, value in after.items() if current.get(key, value) != value))
        current = after
    assert sum(moved) / len(moved) <= 3, moved  # the bar of issue 13
    assert max(moved) <= 8, moved


def test_keys_that_fit_keep_their_hashed_values() -> None:
    keys = [f"report-{n}" for n in range(10)]
    terms = terms_of("H * * * *")
    minutes = [minute_by_hand(key) for key in keys]
    assigned = assign(keys, terms)
    for key, minute in zip(keys, minutes, strict=True):
        assert seeded(key, terms) == (minute,)
        if minutes.count(minute) == 1:
            assert assigned[key] == (minute,), key


def test_offsets_place_the_hash_terms_of_an_expression() -> None:
    expr = parse("H/15 H(9-16) * * 1-5", key="report", offsets=(7, 2))
    assert str(expr) == "7,22,37,52 11 * * 1-5"
    assert expr.offsets == (7, 2)
    assert parse("H/15 H(9-16) * * 1-5", key="report").offsets is None


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("H * * * *", "H(0-59) * * * *", True),
        ("H * * * *", "# * * * *", True),
        ("H * * * *", "@hourly", True),
        ("H * * * *", "H(0-29) * * * *", False),
        ("H * * * *", "H * * * 1-5", False),
        ("H 9 * * *", "H 10 * * *", False),
    ],
)
def test_shapes(first: str, second: str, same: bool) -> None:
    assert (shape_of(first) == shape_of(second)) is same
