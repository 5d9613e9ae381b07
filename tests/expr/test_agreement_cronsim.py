"""Agreement with cronsim on plain expressions, where docs/design.md §2 says our semantics are its
own (Vixie/Debian day rule, Debian's DST rule for fixed-time jobs, real instants otherwise).

Where cronsim is known to differ from §2, the case is left out here and covered by the oracle
instead; each exclusion says why:

* cronsim does not read '?' or nW (the generator leaves them out), nor day_and=True.
* A fixed-time job started inside a repeated (fall-back) hour: cronsim walks naive wall time,
  forgets which occurrence the start was, and can answer a time *before* the start.
* Lord Howe's half-hour fall-back: for '*'-minute jobs with a restricted hour cronsim skips the
  wall times just after the repeat (e.g. '* 2 * * *' on 2024-04-07 misses 02:00-02:29 +10:30, a
  real half hour); the oracle and the calendar cases pin our behaviour there.
"""

from __future__ import annotations

import itertools
import re
from datetime import datetime, timezone

import pytest
from cronsim import CronSim
from hypothesis import assume, given
from hypothesis import strategies as st

from celery_hashbeat.expr import parse
from tests.expr import oracle
from tests.expr.strategies import ZONES, expression_text, instants

STEPS = 12

CURATED = [
    "* * * * *",
    "*/15 * * * *",
    "0 0 * * *",
    "30 2 * * *",
    "0 9-17/2 * * 1-5",
    "0 0 29 2 *",
    "0 0 1,15 * 1",
    "59 23 31 12 *",
    "0,30 1-3 * * *",
    "*/20 1,2,3 * * *",
    "15 2,3 * * *",
    "5 * * * *",
    "0 */2 * * *",
    "0 0 L * *",
    "0 0 LW * *",
    "0 0 * * 5L",
    "0 0 * * 1#2",
    "0 12 * * 1/2",
    "0 0 1 * MON",
    "0 0 */2 * 1",
    "0 0 * JAN,JUL SUN",
    "*/7 * * * * *",
    "0 30 2 * * *",
    "15 */20 * * * *",
]


def _starts(tz_name: str) -> list[datetime]:
    """A few hours before each DST change of 2024-2025 (or two plain instants in UTC)."""
    if tz_name == "UTC":
        return [
            datetime(2024, 12, 31, 20, 17, 3, tzinfo=timezone.utc),
            datetime(2026, 3, 7, 12, 34, 56, tzinfo=timezone.utc),
        ]
    tz = oracle.zone(tz_name)
    first = datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()
    last = datetime(2026, 1, 1, tzinfo=timezone.utc).timestamp()
    marks = [t for t in oracle.transitions(tz_name) if first <= t < last]
    return [datetime.fromtimestamp(t - 3 * 3600 - 17, tz) for t in marks]


def _fixed_time(text: str) -> bool:
    fields = text.split()
    return len(fields) == 5 and not fields[0].startswith("*") and not fields[1].startswith("*")


def cronsim_is_wrong(text: str, tz_name: str) -> bool:
    """Lord Howe, real-instant rule: cronsim drops wall times after the half-hour repeat."""
    return tz_name == "Australia/Lord_Howe" and not _fixed_time(text)


_DEGENERATE_STEPPED_RANGE = re.compile(r"(?<![\w-])(\w+)-\1/")


def cronsim_misreads(text: str) -> bool:
    """cronsim reads 'a-a/n' as 'a/n' (a to the field's end); §2 says a-b/n is a..b."""
    return _DEGENERATE_STEPPED_RANGE.search(text) is not None


def ours(text: str, tz_name: str, start: datetime, count: int = STEPS) -> list[str]:
    expr = parse(text, tz=None if tz_name == "UTC" else tz_name)
    return [d.isoformat() for d in itertools.islice(expr.iter(start), count)]


def theirs(text: str, tz_name: str, start: datetime, count: int = STEPS) -> list[str]:
    sim = CronSim(text, start.astimezone(oracle.zone(None if tz_name == "UTC" else tz_name)))
    return [d.isoformat() for d in itertools.islice(sim, count)]


def oracle_says(text: str, tz_name: str, start: datetime, count: int = STEPS) -> list[str]:
    tz = oracle.zone(None if tz_name == "UTC" else tz_name)
    found = oracle.iter_next(oracle.parse(text), tz, start.timestamp(), 400 * 86400)
    return [datetime.fromtimestamp(t, tz).isoformat() for t in itertools.islice(found, count)]


@pytest.mark.parametrize("tz_name", ZONES)
@pytest.mark.parametrize("text", CURATED)
def test_curated_expressions_agree(text: str, tz_name: str) -> None:
    """Twelve fires in a row, from a few hours before each DST change."""
    cronsim_wrong = cronsim_is_wrong(text, tz_name)
    for start in _starts(tz_name):
        # Where cronsim is known wrong (see module), the oracle stands in for it.
        want = oracle_says(text, tz_name, start) if cronsim_wrong else theirs(text, tz_name, start)
        assert ours(text, tz_name, start) == want, start.isoformat()


def _in_repeated_wall_time(start: datetime, tz_name: str) -> bool:
    """Is the start's wall time one that the zone shows twice?"""
    tz = oracle.zone(tz_name)
    wall = start.astimezone(tz).replace(tzinfo=None)
    first = wall.replace(tzinfo=tz, fold=0).utcoffset()
    second = wall.replace(tzinfo=tz, fold=1).utcoffset()
    return first != second


@given(
    expression_text(hashes=False, cronsim_dialect=True),
    st.sampled_from(ZONES),
    st.data(),
)
def test_generated_expressions_agree(text: str, tz_name: str, data: st.DataObject) -> None:
    """Hypothesis-made plain expressions: our first twelve fires are cronsim's."""
    start = data.draw(instants(tz_name))
    assume(not cronsim_misreads(text))
    assume(not (_fixed_time(text) and _in_repeated_wall_time(start, tz_name)))
    got = ours(text, tz_name, start)
    if cronsim_is_wrong(text, tz_name):
        want = oracle_says(text, tz_name, start)  # 400 days of it: may be fewer than twelve
    else:
        want = theirs(text, tz_name, start)  # cronsim gives up after 50 years
    assert got[: len(want)] == want


def test_the_documented_departures_are_real() -> None:
    """The exclusions above are cronsim's, not ours: on them cronsim contradicts §2 and the
    oracle, and the engine follows the oracle."""
    tz_name = "America/New_York"
    start = datetime(2024, 11, 3, 1, 15, fold=1, tzinfo=oracle.zone(tz_name))  # 01:15 EST
    assert ours("30 1 * * *", tz_name, start, 1) == oracle_says("30 1 * * *", tz_name, start, 1)
    assert datetime.fromisoformat(theirs("30 1 * * *", tz_name, start, 1)[0]) < start

    howe = "Australia/Lord_Howe"
    start = datetime(2024, 4, 7, 1, 58, tzinfo=oracle.zone(howe))
    assert ours("* 2 * * *", howe, start, 2) == oracle_says("* 2 * * *", howe, start, 2)
    assert theirs("* 2 * * *", howe, start, 1) != oracle_says("* 2 * * *", howe, start, 1)

    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert cronsim_misreads("0-0/1 * * * *")
    assert ours("0-0/1 * * * *", "UTC", start, 2) == oracle_says("0-0/1 * * * *", "UTC", start, 2)
    assert theirs("0-0/1 * * * *", "UTC", start, 2) != ours("0-0/1 * * * *", "UTC", start, 2)
