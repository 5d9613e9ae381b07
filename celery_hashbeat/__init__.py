"""celery_hashbeat: a highly available Celery beat scheduler with hashed cron schedules."""

from celery_hashbeat.expr import CronExpr, CronSyntaxError, NoFireTimeError, parse

__all__ = ["CronExpr", "CronSyntaxError", "NoFireTimeError", "parse"]
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.refusals import (
    AdminError,
    ConflictError,
    RunInProgressError,
    StoreProblemError,
    UnknownEntryError,
)
from celery_hashbeat.scheduler import Scheduler
from celery_hashbeat.schedules import at, hashcron, hashinterval
from celery_hashbeat.worker import signals  # noqa: F401 - connects the worker's receivers

__all__ += [
    "AdminError",
    "ConflictError",
    "RunInProgressError",
    "ScheduleAdmin",
    "Scheduler",
    "StoreProblemError",
    "UnknownEntryError",
    "at",
    "hashcron",
    "hashinterval",
]
