"""What the control room's tests share: beats that read the store's controls at every round of
ticks (a poll interval of POLL_S, waited out by ``read``), and a ScheduleAdmin on the test's app
and clock whose entries run the registered task ``shop.report``. tests/control/conftest.py
connects the fixtures."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from celery import Celery

from celery_hashbeat import Scheduler
from celery_hashbeat.control import polling as control
from celery_hashbeat.control.admin import ScheduleAdmin
from tests.support.beat_fixtures import Clock, drain

#: The poll interval in these tests (seconds): short, so every round of ticks reads the controls.
POLL_S = 0.01


def read(*beats: Scheduler) -> None:
    """Let the poll interval pass, then tick each beat until it settles."""
    time.sleep(POLL_S * 1.5)
    for beat in beats:
        drain(beat)


@pytest.fixture(autouse=True)
def poll_every_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "POLL_S", POLL_S)


def report(*args: object, **kwargs: object) -> None:
    """The task stored entries run (registered, as ScheduleAdmin checks by default)."""


@pytest.fixture
def admin(app: Celery, clock: Clock) -> Iterator[ScheduleAdmin]:
    app.task(name="shop.report")(report)
    made = ScheduleAdmin(app)
    made.clock = clock
    yield made
    made.close()
