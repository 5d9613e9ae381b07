"""The ``tz`` argument takes any tzinfo (§4), and the DST rule holds in zones whose changes are
unusual: at midnight, two hours wide, negative (Dublin), or a whole day skipped (Apia)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest
from dateutil import tz as dateutil_tz
from hypothesis import given
from hypothesis import strategies as st

from celery_hashbeat.expr import parse
from tests.expr import oracle
from tests.expr.strategies import Case, any_cases, instants

EXOTIC = (
    "America/Santiago",  # DST changes at midnight: some days have no 00:00
    "Asia/Beirut",
    "America/Havana",
    "Antarctica/Troll",  # a two-hour shift
    "Europe/Dublin",  # "negative" DST in tzdata
    "Pacific/Apia",
    "Asia/Kathmandu",  # +05:45, no DST
)


@given(any_cases(zones=EXOTIC), st.data())
def test_unusual_zones_follow_the_oracle(case: Case, data: st.DataObject) -> None:
    """next() and prev() agree with the oracle in zones with awkward transitions."""
    start = data.draw(instants(case.tz_name, case.near))
    expr = parse(case.text, case.key, tz=case.tz_arg, day_and=case.day_and)
    horizon = case.horizon()
    t = start.timestamp()
    want_next = oracle.next_fire(case.spec, case.tz, t, horizon)
    got_next = expr.next(start).timestamp()
    if want_next is None:
        assert got_next > t + horizon
    else:
        assert got_next == want_next, (case.text, case.tz_name, start.isoformat())
    want_prev = oracle.prev_fire(case.spec, case.tz, t, horizon)
    got_prev = expr.prev(start).timestamp()
    if want_prev is None:
        assert got_prev < t - horizon
    else:
        assert got_prev == want_prev, (case.text, case.tz_name, start.isoformat())


def _first(text: str, zone: tzinfo | str, start: datetime, count: int = 40) -> list[float]:
    expr = parse(text, "tz-flavours", tz=zone)
    return [d.timestamp() for d in itertools.islice(expr.iter(start), count)]


FLAVOURS = [
    "30 2 * * *",
    "30 1 * * *",
    "*/30 1-3 * * *",
    "0 * * * *",
    "H H(0-3) * * *",
    "0 30 1 * * *",
]


@pytest.mark.parametrize("text", FLAVOURS)
@pytest.mark.parametrize("month", [3, 11])
def test_dateutil_zone_is_a_tzinfo_like_any_other(text: str, month: int) -> None:
    """A dateutil tz (which is not hashable) gives the fires the zoneinfo zone gives."""
    start = datetime(2024, month, 1, tzinfo=timezone.utc)
    flavour = dateutil_tz.gettz("America/New_York")
    assert flavour is not None
    assert _first(text, flavour, start) == _first(text, ZoneInfo("America/New_York"), start)


@pytest.mark.parametrize(
    "zone",
    [
        timezone(timedelta(hours=5, minutes=45)),
        timezone(timedelta(hours=-3, minutes=-30)),
        dateutil_tz.tzutc(),
        dateutil_tz.tzoffset("X", 3600),
    ],
    ids=repr,
)
def test_fixed_offset_zones(zone: tzinfo) -> None:
    """Fixed offsets: every wall time exists once, so 09:00 local is 09:00 local every day."""
    start = datetime(2024, 3, 9, tzinfo=timezone.utc)
    expr = parse("0 9 * * *", tz=zone)
    fires = list(itertools.islice(expr.iter(start), 3))
    offset = zone.utcoffset(None)
    assert offset is not None
    for fire in fires:
        assert fire.utcoffset() == offset
        assert (fire.hour, fire.minute, fire.second) == (9, 0, 0)
    assert [b - a for a, b in itertools.pairwise(fires)] == [timedelta(days=1)] * 2
