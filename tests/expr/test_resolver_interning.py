"""A Resolver interns what it resolves by the hash terms' offsets (expr/resolve.py): a warm one
must answer every key as a fresh one does, and a key's draws and the same offsets given by the
balancer must find one resolved expression."""

from __future__ import annotations

import pytest

from celery_hashbeat.expr.balance import seeded, terms_of
from celery_hashbeat.expr.grammar import parse_template
from celery_hashbeat.expr.resolve import Parsed, Resolver
from celery_hashbeat.expr.seeding import Key

EXPRESSIONS = [
    "H * * * *",
    "H(0-29)/10 H * * 1-5",
    "H,30 H/6 * * *",
    "5 H H(1-28) * 1",
    "H H H * * *",
]
KEYS: list[Key] = [*(f"job-{n}" for n in range(150)), b"raw", 7]


def shown(parsed: Parsed) -> tuple[object, ...]:
    day = parsed.resolved.day
    values = parsed.resolved
    return (
        parsed.resolved_text,
        parsed.day_and,
        values.seconds,
        values.minutes,
        values.hours,
        values.months,
        day.days,
        day.weekdays,
        day.both_must_match,
    )


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_warm_resolver_answers_as_a_fresh_one(expression: str) -> None:
    warm = Resolver(parse_template(expression))
    for day_and in (False, True):
        for key in KEYS:
            fresh = Resolver(parse_template(expression)).resolve(key, day_and)
            assert shown(warm.resolve(key, day_and)) == shown(fresh)


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_drawn_and_given_offsets_find_one_expression(expression: str) -> None:
    resolver = Resolver(parse_template(expression))
    terms = terms_of(expression)
    for key in KEYS:
        offsets = seeded(key, terms)
        assert resolver.resolve(None, False, offsets) is resolver.resolve(key, False)
        fresh = Resolver(parse_template(expression)).resolve("other", False, offsets)
        assert shown(fresh) == shown(resolver.resolve(key, False))


def test_the_day_rule_is_kept_apart() -> None:
    resolver = Resolver(parse_template("0 0 H(1-28) * 1"))
    either, both = resolver.resolve("k", False), resolver.resolve("k", True)
    assert either.resolved_text == both.resolved_text
    assert (either.resolved.day.both_must_match, both.resolved.day.both_must_match) == (False, True)
