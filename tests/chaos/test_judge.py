"""The judge of the chaos scenarios must catch what it claims to: each rule broken on purpose.

Fast and single-process: if ``problems`` ever went blind, the slow scenarios would pass vacuously.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from celery_hashbeat import hashcron, hashinterval
from celery_hashbeat.beat.backfill import unqueued
from celery_hashbeat.control.backfill import Request, slot_iso
from tests.chaos.app import TASK, chaos_schedule
from tests.chaos.harness import (
    BACKFILL_UNQUEUED,
    backfill_problems,
    next_slot,
    problems,
    task_id,
    token_pid,
)
from tests.support.broker import Delivery, iso_to_ms

SECOND = 1000
T0 = 1_800_000_000_000  # a whole second, epoch ms

SCHEDULE = {"every-second": {"task": TASK, "schedule": hashcron("*/1 * * * * *")}}


def sent(entry: str, slot: int, pid: int = 1, task: str | None = None) -> Delivery:
    return Delivery(entry, slot, task or task_id(entry, slot), f"gen{pid}@host", slot / 1000)


def seconds(*offsets: int, entry: str = "every-second") -> list[Delivery]:
    return [sent(entry, T0 + offset * SECOND) for offset in offsets]


def test_a_clean_record_passes() -> None:
    assert problems(seconds(0, 1, 2, 3), SCHEDULE, catch_up_all=True) == []


@pytest.mark.parametrize(
    ("deliveries", "complaint"),
    [
        (seconds(0, 1, 1, 2), "duplicate: every-second slot"),
        (seconds(0, 1, 3), "lost: every-second never enqueued 1 slot(s)"),
        ([*seconds(0, 1), sent("every-second", T0 + 1500)], "are not slots of its schedule"),
        ([*seconds(0), sent("every-second", T0 + SECOND, task="nope")], "is not uuid5"),
        ([*seconds(0), sent("elsewhere", T0)], "unknown entry 'elsewhere'"),
    ],
    ids=["duplicate", "gap", "off-schedule", "task-id", "unknown-entry"],
)
def test_each_broken_rule_is_named(deliveries: list[Delivery], complaint: str) -> None:
    found = problems(deliveries, SCHEDULE, catch_up_all=True)
    assert any(complaint in line for line in found), found


def test_gaps_count_only_with_catch_up_all_and_within_a_store_lifetime() -> None:
    gap = seconds(0, 1, 5, 6)
    assert problems(gap, SCHEDULE, catch_up_all=False) == []
    assert problems(gap, SCHEDULE, catch_up_all=True, wipes=[(T0 + 2 * SECOND) / 1000]) == []
    assert problems(gap, SCHEDULE, catch_up_all=True, wipes=[(T0 + 7 * SECOND) / 1000])


def test_a_claimed_slot_never_enqueued_is_lost_in_any_mode() -> None:
    fences = {"every-second": T0 + 2 * SECOND}
    found = problems(seconds(0, 1), SCHEDULE, catch_up_all=False, fences=fences)
    assert any("claimed in the store but never enqueued" in line for line in found), found
    assert problems(seconds(0, 1, 2), SCHEDULE, catch_up_all=False, fences=fences) == []


def test_an_entry_that_stopped_before_the_end_is_named() -> None:
    record = seconds(0, 1, 2)
    assert problems(record, SCHEDULE, catch_up_all=True, until=(T0 + 2.5 * SECOND) / 1000) == []
    found = problems(record, SCHEDULE, catch_up_all=True, until=(T0 + 6 * SECOND) / 1000)
    assert any("stopped enqueueing" in line for line in found), found
    found = problems([], SCHEDULE, catch_up_all=True, until=T0 / 1000)
    assert found == ["every-second: never enqueued"]


@pytest.mark.parametrize("name", sorted(chaos_schedule()))
def test_the_oracle_agrees_with_the_schedule_objects(name: str) -> None:
    """The oracle computes slots from the engine and the seeding; the schedules compute them
    their own way; they must agree, or the judge would flag the wrong slots."""
    schedule = chaos_schedule()[name]["schedule"]
    after = T0 + 123
    if isinstance(schedule, timedelta):
        assert next_slot(name, schedule, after) == after + 1000
        return
    assert isinstance(schedule, hashcron | hashinterval)
    own = schedule.bound(name)
    for _ in range(5):
        assert next_slot(name, schedule, after) == own.next_slot(after)
        after = own.next_slot(after)


def test_parsing_of_tokens_origins_and_slots() -> None:
    assert token_pid("host.example:4242:abcdef") == 4242
    assert sent("x", T0, pid=77).pid == 77
    assert Delivery("x", T0, "id", "", 0.0).pid is None
    assert iso_to_ms("2027-01-15T08:00:00.250+00:00") - iso_to_ms("2027-01-15T08:00:00Z") == 250


def test_only_the_slots_a_beat_called_ambiguous_may_be_missing() -> None:
    gap = seconds(0, 1, 4)  # 2 and 3 missing
    maybe = frozenset({("every-second", T0 + 2 * SECOND)})
    found = problems(gap, SCHEDULE, catch_up_all=True, ambiguous=maybe)
    assert len(found) == 1 and f"[{T0 + 3 * SECOND}]" in found[0], found
    both = maybe | {("every-second", T0 + 3 * SECOND)}
    assert problems(gap, SCHEDULE, catch_up_all=True, ambiguous=both) == []
    fences = {"every-second": T0 + 5 * SECOND}
    assert problems(seconds(0, 1), SCHEDULE, catch_up_all=False, fences=fences)
    kept = frozenset({("every-second", T0 + 5 * SECOND)})
    assert (
        problems(seconds(0, 1), SCHEDULE, catch_up_all=False, fences=fences, ambiguous=kept) == []
    )


def test_backfilled_slots_are_judged_each_at_most_once_and_only_if_asked() -> None:
    asked = {"paused": {T0, T0 + SECOND, T0 + 2 * SECOND}}
    assert backfill_problems(seconds(0, 1, 2, entry="paused"), asked) == []
    others = [*seconds(0, 1, 2, entry="paused"), *seconds(7, 7)]  # another entry's: not here
    assert backfill_problems(others, asked) == []
    broken = {
        "duplicate: backfilled paused slot": seconds(0, 1, 1, 2, entry="paused"),
        "though no backfill asked for it": seconds(0, 1, 2, 5, entry="paused"),
        "never enqueued 1 slot(s)": seconds(0, 2, entry="paused"),
    }
    for complaint, deliveries in broken.items():
        found = backfill_problems(deliveries, asked)
        assert len(found) == 1 and complaint in found[0], found
    logged = frozenset({("paused", T0 + SECOND)})
    assert backfill_problems(seconds(0, 2, entry="paused"), asked, logged) == []


@pytest.mark.parametrize(("claimer", "leave"), [("", False), ("c1", True)])
def test_the_judge_reads_the_range_of_a_backfill_left_out_of_the_queue(
    claimer: str, leave: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The line a beat writes for the rest of a backfill it could not queue again is read as
    the judge's leave for those slots to be missing only where they may be: when the turn's
    claim went unanswered too (its claimer is not in the request the store keeps); otherwise
    the store keeps the request as taken and the next leader sends its slots."""
    request = Request("paused", "r1", T0 + 1, T0 + 5 * SECOND, T0, claimer)
    with caplog.at_level(logging.WARNING):
        unqueued(request, "this beat no longer leads")
    assert "may not be back in the store's queue" in caplog.text
    read = BACKFILL_UNQUEUED.findall(caplog.text)
    expected = [("paused", slot_iso(T0 + 1), slot_iso(T0 + 5 * SECOND))] if leave else []
    assert read == expected
