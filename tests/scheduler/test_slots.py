"""Slot arithmetic and the catch-up policy, checked against brute force."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from celery import Celery
from celery.schedules import crontab, schedule, solar
from hypothesis import given
from hypothesis import strategies as st

from celery_hashbeat import parse
from celery_hashbeat.entries import ALL_CAP, Entry
from celery_hashbeat.slots import ChainSlots, CronSlots, DerivedSlots, IntervalSlots, Slots, to_ms

UTC = timezone.utc
T0 = to_ms(datetime(2030, 1, 1, tzinfo=UTC))
MINUTE = 60_000


def brute(source: Slots, low: int, high: int) -> list[int]:
    """Every slot in (low, high], stepping one slot at a time."""
    found, slot = [], source.next_after(low)
    while slot <= high:
        found.append(slot)
        slot = source.next_after(slot)
    return found


@pytest.fixture(scope="module")
def app() -> Celery:
    return Celery("slots", set_as_current=False, config_source={"timezone": "Europe/Paris"})


sources = st.one_of(
    st.builds(
        lambda period, offset: IntervalSlots(period, offset % period),
        st.integers(1, 5000),
        st.integers(0, 10**6),
    ),
    st.builds(ChainSlots, st.integers(1, 5000)),
)


@given(sources, st.integers(-(10**6), 10**6), st.integers(0, 20_000), st.integers(1, 30))
def test_recent_is_the_tail_of_a_brute_force_walk(
    source: Slots, low: int, span: int, limit: int
) -> None:
    assert source.recent(low, low + span, limit) == brute(source, low, low + span)[-limit:]


@given(st.integers(1, 10**7), st.integers(0, 10**7), st.integers(-(10**9), 10**9))
def test_interval_slots_are_aligned_and_strictly_after(period: int, offset: int, ms: int) -> None:
    source = IntervalSlots(period, offset % period)
    following = source.next_after(ms)
    assert ms < following <= ms + period
    assert (following - offset % period) % period == 0


def test_cron_recent_steps_backwards() -> None:
    source = CronSlots(parse("*/7 * * * * *"))
    high = T0 + 10 * MINUTE + 123
    assert source.recent(T0, high, 5) == brute(source, T0, high)[-5:]
    assert source.recent(T0, high, 10_000) == brute(source, T0, high)
    assert source.recent(high, high, 3) == []


def test_derived_slots_are_a_pure_function_of_the_instant(app: Celery) -> None:
    source = DerivedSlots(crontab(minute="*/15", hour="9"), app)
    # 09:00 in Paris is 08:00 UTC in winter; whatever the real time, the answer is the same.
    assert source.next_after(T0) == T0 + 8 * 60 * MINUTE
    assert source.next_after(T0 + 8 * 60 * MINUTE) == T0 + (8 * 60 + 15) * MINUTE
    assert source.next_after(T0 + 8 * 60 * MINUTE + 1) == T0 + (8 * 60 + 15) * MINUTE
    # A relative schedule is rounded to its resolution (minutes here), as Celery rounds it.
    relative = DerivedSlots(schedule(timedelta(minutes=10), relative=True), app)
    assert relative.next_after(T0 + 3 * MINUTE + 5) == T0 + 13 * MINUTE


def test_a_long_forward_scan_re_anchors_near_the_present(app: Celery) -> None:
    source = DerivedSlots(crontab(), app)  # every minute
    high = T0 + 5000 * MINUTE
    assert source.recent(T0, high, 3) == [high - 2 * MINUTE, high - MINUTE, high]


def test_solar_slots(app: Celery) -> None:
    pytest.importorskip("ephem")
    source = DerivedSlots(solar("sunrise", 48.85, 2.35), app)
    sunrise = source.next_after(T0)
    assert T0 + 6 * 60 * MINUTE < sunrise < T0 + 8 * 60 * MINUTE  # ~07:44 UTC in Paris
    assert source.next_after(sunrise) - sunrise > 23 * 60 * MINUTE


def entry(source: Slots, catch_up: str, window: int | None) -> Entry:
    return Entry("e", "t", None, source, (), {}, {}, False, catch_up, window)


@given(
    st.integers(1, 50),
    st.integers(0, 10_000),
    st.integers(0, 20_000),
    st.sampled_from(["latest", "all", "skip"]),
    st.none() | st.integers(0, 5_000),
)
def test_catch_up_keeps_what_the_policy_says(
    period: int, fence: int, gap: int, mode: str, window: int | None
) -> None:
    source = IntervalSlots(period, 0)
    now = fence + gap
    missed = brute(source, fence, now)
    if window is not None:
        missed = [slot for slot in missed if slot >= now - window]
    expected = {"latest": missed[-1:], "all": missed[-ALL_CAP:], "skip": []}[mode]

    planned = entry(source, mode, window)
    planned.start(fence, now)
    fired = []
    while planned.slot is not None and planned.slot <= now:
        fired.append(planned.slot)
        planned.advance(planned.slot, now)
    assert fired == expected
    assert planned.slot == source.next_after(now)


def test_a_new_entry_waits_for_its_next_slot() -> None:
    planned = entry(IntervalSlots(1000, 250), "all", None)
    planned.start(None, T0 + 5_000)
    assert planned.slot == T0 + 5_250
