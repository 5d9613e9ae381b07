"""Every error the schedule model raises is a HashbeatError, so one clause catches them all, and
still the ValueError it always was, so code that caught that keeps working."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from celery import Celery

from celery_hashbeat.entries import errors
from celery_hashbeat.entries.building import build_entry
from celery_hashbeat.entries.errors import EntryError, FanOutError, ScheduleEnded
from celery_hashbeat.entries.fanout import fanned_nodes
from celery_hashbeat.entries.sharing import SharedSlots
from celery_hashbeat.errors import HashbeatError
from celery_hashbeat.settings import Settings

NOW = 1_900_000_000_000
PAST = datetime(2000, 1, 1, tzinfo=timezone.utc)


def raised() -> list[type[Exception]]:
    """Every error class entries/errors.py defines."""
    return [
        kind
        for kind in vars(errors).values()
        if isinstance(kind, type) and issubclass(kind, Exception) and kind is not HashbeatError
    ]


def test_each_error_of_the_schedule_model_is_a_hashbeat_error_and_a_value_error() -> None:
    kinds = raised()
    assert {kind.__name__ for kind in kinds} >= {
        "EntryError",
        "EntryFinished",
        "FanOutError",
        "ScheduleEnded",
        "ScheduleTooSlow",
    }
    for kind in kinds:
        assert issubclass(kind, HashbeatError) and issubclass(kind, ValueError), kind


def test_an_entry_that_finished_is_still_a_schedule_that_ended() -> None:
    assert issubclass(errors.EntryFinished, ScheduleEnded)


@pytest.mark.parametrize(
    "definition",
    [
        "every minute",
        {"task": "t", "schedule": 60, "color": "red"},
        {"task": "", "schedule": 60},
        {"task": "t", "schedule": object()},
        {"task": "t", "schedule": 60, "catch_up": "newest"},
        {"task": "t", "schedule": 60, "end": PAST},
        {"task": "t", "schedule": "H * * *"},
    ],
    ids=["not-a-dict", "unknown-key", "no-task", "unknown-schedule", "bad-policy", "ended", "text"],
)
def test_a_bad_entry_raises_a_hashbeat_error_that_is_a_value_error(definition: Any) -> None:
    app = Celery("errors", set_as_current=False, config_source={"timezone": "UTC"})
    with pytest.raises(EntryError) as refused:
        build_entry("e", definition, Settings(), SharedSlots(app), NOW)
    assert isinstance(refused.value, HashbeatError) and isinstance(refused.value, ValueError)
    assert "'e'" in str(refused.value)


@pytest.mark.parametrize(
    "definition",
    [
        {"task": "t", "workers": 3},
        {"task": "t", "workers": ["w1", "w1"]},
        {"task": "t", "workers": "*", "options": {"queue": "q"}},
    ],
    ids=["not-a-list", "listed-twice", "routed"],
)
def test_a_bad_workers_value_raises_a_hashbeat_error_that_is_a_value_error(
    definition: dict[str, Any],
) -> None:
    with pytest.raises(FanOutError) as refused:
        fanned_nodes("e", definition)
    assert isinstance(refused.value, HashbeatError) and isinstance(refused.value, ValueError)
