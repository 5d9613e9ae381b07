"""next/prev/matches/iter against the brute-force oracle, over generated expressions, keys and
zones, starting near DST changes and year ends (docs/design.md §2 and §4).

The oracle searches a bounded window; when it finds nothing there, the engine's answer must lie
beyond the window, which still checks that nothing was skipped.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone, tzinfo

from hypothesis import given
from hypothesis import strategies as st

from celery_hashbeat.expr import CronExpr, parse
from tests.expr import oracle
from tests.expr.strategies import Case, any_cases, cases, instants, present


def build(case: Case) -> CronExpr:
    """Parse a generated case the way a user would."""
    return parse(case.text, case.key, tz=case.tz_arg, day_and=case.day_and)


def assert_in_zone(got: datetime, ts: int, case: Case) -> None:
    """The engine's datetime is the expected instant, shown in the expression's own zone."""
    expected = datetime.fromtimestamp(ts, case.tz)
    assert got.tzinfo is not None, f"{case.text!r}: naive result {got!r}"
    assert got.timestamp() == ts, (
        f"{case.text!r} key={case.key!r} tz={case.tz_name}: got {got.isoformat()}"
        f" expected {expected.isoformat()}"
    )
    assert got.utcoffset() == expected.utcoffset(), f"{got!r} is not shown in {case.tz_name}"
    if case.tz_name != "UTC":
        assert getattr(got.tzinfo, "key", None) == case.tz_name, f"{got.tzinfo!r}"
    assert (got.replace(tzinfo=None), got.fold) == (expected.replace(tzinfo=None), expected.fold)


def describe_ts(ts: float | None, tz: tzinfo) -> str:
    if ts is None:
        return "none in window"
    return datetime.fromtimestamp(ts, tz).isoformat()


@given(any_cases(), st.data())
def test_next_agrees_with_oracle(case: Case, data: st.DataObject) -> None:
    """next(t) is the oracle's first fire strictly after t, in the expression's zone."""
    start = data.draw(instants(case.tz_name, case.near))
    shown = present(start, case.tz_name, data.draw(st.integers(0, 2)))
    expected = oracle.next_fire(case.spec, case.tz, start.timestamp(), case.horizon())
    got = build(case).next(shown)
    if expected is None:
        assert got.timestamp() > start.timestamp() + case.horizon(), (
            f"{case.text!r}: engine fired at {got.isoformat()}, oracle saw no fire in window"
        )
    else:
        assert_in_zone(got, expected, case)


@given(any_cases(), st.data())
def test_prev_agrees_with_oracle(case: Case, data: st.DataObject) -> None:
    """prev(t) is the oracle's last fire strictly before t."""
    start = data.draw(instants(case.tz_name, case.near))
    shown = present(start, case.tz_name, data.draw(st.integers(0, 2)))
    expected = oracle.prev_fire(case.spec, case.tz, start.timestamp(), case.horizon())
    got = build(case).prev(shown)
    if expected is None:
        assert got.timestamp() < start.timestamp() - case.horizon(), (
            f"{case.text!r}: engine's prev {got.isoformat()}, oracle saw no fire in window"
        )
    else:
        assert_in_zone(got, expected, case)


@given(any_cases(), st.data())
def test_matches_agrees_with_oracle(case: Case, data: st.DataObject) -> None:
    """matches() says yes exactly on fire instants, shown in any zone."""
    start = data.draw(instants(case.tz_name, case.near))
    expr = build(case)
    base = int(start.timestamp())
    probes = {base, base - base % 60}
    fire = oracle.next_fire(case.spec, case.tz, start.timestamp(), case.horizon())
    if fire is not None:
        probes |= {fire, fire - 1, fire + 1, fire - 60, fire + 60, fire + 3600}
    for ts in sorted(probes):
        instant = datetime.fromtimestamp(ts, timezone.utc)
        want = oracle.fires_at(case.spec, case.tz, instant)
        for how in range(3):
            shown = present(instant, case.tz_name, how)
            assert expr.matches(shown) is want, (
                f"{case.text!r} key={case.key!r}: matches({shown.isoformat()}) should be {want}"
            )
    if fire is not None:
        late = datetime.fromtimestamp(fire, timezone.utc) + timedelta(microseconds=1)
        assert expr.matches(late) is False, "a fire instant plus 1 µs is not a fire instant"


@given(any_cases(), st.data())
def test_iter_is_the_oracle_sequence(case: Case, data: st.DataObject) -> None:
    """iter() yields the fires in strictly increasing order, the same ones the oracle finds."""
    start = data.draw(instants(case.tz_name, case.near))
    expected = list(
        itertools.islice(oracle.iter_next(case.spec, case.tz, start.timestamp(), case.horizon()), 8)
    )
    got = list(itertools.islice(build(case).iter(start), 8))
    assert len(got) == 8
    stamps = [g.timestamp() for g in got]
    assert all(a < b for a, b in itertools.pairwise(stamps)), stamps
    assert stamps[: len(expected)] == expected, (
        [describe_ts(s, case.tz) for s in stamps[: len(expected)]],
        [describe_ts(s, case.tz) for s in expected],
    )
    if len(expected) < 8:
        assert stamps[len(expected)] > start.timestamp() + case.horizon()


@given(any_cases(), st.data())
def test_next_and_prev_are_inverse(case: Case, data: st.DataObject) -> None:
    """n = next(t): nothing fires in (t, n), so prev(n) <= t, and next(prev(n)) == n."""
    start = data.draw(instants(case.tz_name, case.near))
    expr = build(case)
    after = expr.next(start)
    before = expr.prev(after)
    assert before.timestamp() <= start.timestamp()
    assert expr.next(before).timestamp() == after.timestamp()
    assert expr.matches(after)
    assert expr.matches(before)
    if expr.matches(start):
        assert before.timestamp() == start.timestamp()
        assert expr.prev(start).timestamp() < start.timestamp()
    else:
        assert expr.prev(start).timestamp() == before.timestamp()


@given(any_cases(), st.data())
def test_next_timestamp_is_next(case: Case, data: st.DataObject) -> None:
    """The float fast path gives the same instant as next(), as an int."""
    start = data.draw(instants(case.tz_name, case.near))
    expr = build(case)
    got = expr.next_timestamp(start.timestamp())
    assert isinstance(got, int)
    expected = oracle.next_fire(case.spec, case.tz, start.timestamp(), case.horizon())
    if expected is None:
        assert got > start.timestamp() + case.horizon()
    else:
        assert got == expected
    assert got == expr.next(start).timestamp()


@given(cases(zones=("America/New_York", "Europe/Riga", "UTC")), st.data())
def test_naive_datetimes_are_read_in_the_zone(case: Case, data: st.DataObject) -> None:
    """A naive 'after' is a wall time of the expression's zone (away from DST changes here,
    where a wall time names exactly one instant)."""
    when = data.draw(
        st.datetimes(min_value=datetime(2021, 5, 1), max_value=datetime(2021, 9, 30))
        | st.datetimes(min_value=datetime(2022, 12, 1), max_value=datetime(2023, 2, 28))
    )
    expr = build(case)
    aware = when.replace(tzinfo=case.tz)
    got = expr.next(when)
    want = expr.next(aware)
    if got.tzinfo is None:
        got = got.replace(tzinfo=case.tz)
    assert got.timestamp() == want.timestamp()
    assert expr.matches(when) is expr.matches(aware)


def _meaning(spec: oracle.Spec) -> tuple[object, ...]:
    dom, dow = spec.dom, spec.dow
    return (
        spec.resolved_sets(),
        (dom.star, dom.last_day, dom.last_weekday, dom.nearest),
        (dow.star, dow.last_dow, dow.nth_dow),
        spec.six,
        spec.fixed_time,
    )


@given(cases())
def test_str_is_the_resolved_expression(case: Case) -> None:
    """str(expr) has no hash terms left and means what the §3 resolution means."""
    shown = str(build(case))
    resolved = oracle.parse(shown)  # no key: fails if any hash term is left
    assert _meaning(resolved) == _meaning(case.spec), f"{case.text!r} -> {shown!r}"
    again = parse(shown, tz=case.tz_arg, day_and=case.day_and)
    start = datetime(2026, 3, 7, 12, 34, 56, tzinfo=timezone.utc)
    assert again.next(start).timestamp() == build(case).next(start).timestamp()
