"""celery_hashbeat: a highly available Celery beat scheduler with hashed cron schedules."""

from .expr import CronExpr, CronSyntaxError, NoFireTimeError, parse

__all__ = ["CronExpr", "CronSyntaxError", "NoFireTimeError", "parse"]
from . import (
    outcomes,  # noqa: F401 - connects the worker's side of the history
    running,  # noqa: F401 - connects the worker's side of the run lease
)
from .admin import AdminError, ScheduleAdmin, UnknownEntryError
from .scheduler import Scheduler
from .schedules import hashcron, hashinterval

__all__ += [
    "AdminError",
    "ScheduleAdmin",
    "Scheduler",
    "UnknownEntryError",
    "hashcron",
    "hashinterval",
]
