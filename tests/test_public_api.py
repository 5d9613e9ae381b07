"""The names users import and configure stay put: the package's export list, the ``hashbeat``
alias that ``celery beat -S hashbeat`` looks up, and the module the banner names."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

import celery_hashbeat

#: Every public name, as the README and docs/design.md §4, §13 and §21 import them.
PUBLIC = [
    "AdminError",
    "ConflictError",
    "CronExpr",
    "CronSyntaxError",
    "NoFireTimeError",
    "RunInProgressError",
    "ScheduleAdmin",
    "Scheduler",
    "StoreProblemError",
    "UnknownEntryError",
    "at",
    "hashcron",
    "hashinterval",
    "parse",
]


def test_the_export_list_is_exactly_the_public_names() -> None:
    assert sorted(celery_hashbeat.__all__) == PUBLIC
    assert len(celery_hashbeat.__all__) == len(set(celery_hashbeat.__all__))


def test_every_public_name_imports() -> None:
    for name in PUBLIC:
        exec(f"from celery_hashbeat import {name}", {})  # as a user writes it
        assert getattr(celery_hashbeat, name) is not None, name


def test_the_hashbeat_alias_is_the_scheduler() -> None:
    """``-S hashbeat``: Celery finds the alias in the ``celery.beat_schedulers`` entry points."""
    [alias] = [ep for ep in entry_points(group="celery.beat_schedulers") if ep.name == "hashbeat"]
    assert alias.value == "celery_hashbeat:Scheduler"
    assert alias.load() is celery_hashbeat.Scheduler


def test_the_scheduler_is_the_class_the_banner_names() -> None:
    """The banner, and ``-S celery_hashbeat.scheduler.Scheduler``, name the class's module."""
    scheduler = importlib.import_module("celery_hashbeat.scheduler")
    assert scheduler.Scheduler is celery_hashbeat.Scheduler
    assert celery_hashbeat.Scheduler.__module__ == "celery_hashbeat.scheduler"
    assert celery_hashbeat.Scheduler.__qualname__ == "Scheduler"
