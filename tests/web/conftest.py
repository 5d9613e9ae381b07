"""The console's fixtures: an app with a configured and a stored entry, and the console on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery import Celery

from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.schedules import hashcron
from celery_hashbeat.web import make_app
from celery_hashbeat.web.app import ConsoleApp

TOKEN = "console-test-token"


def report(*args: object, **kwargs: object) -> None:
    """The task the entries run."""


@pytest.fixture
def shop(app: Celery) -> Celery:
    """The test's app with a registered task and one configured entry, ``nightly``."""
    app.task(name="shop.report")(report)
    app.conf.beat_schedule = {
        "nightly": {"task": "shop.report", "schedule": hashcron("H H * * *")},
    }
    return app


@pytest.fixture
def admin(shop: Celery) -> Iterator[ScheduleAdmin]:
    made = ScheduleAdmin(shop)
    made.add("stored-report", "shop.report", hashcron("H/15 * * * *"))
    yield made
    made.close()


@pytest.fixture
def console(shop: Celery, admin: ScheduleAdmin) -> Iterator[ConsoleApp]:
    made = make_app(shop, token=TOKEN)
    yield made
    made.admin.close()
