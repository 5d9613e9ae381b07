"""The hash-cron engine: text and a key in, fire times out. It imports nothing of Celery."""

from .cronexpr import CronExpr, parse
from .errors import CronSyntaxError, NoFireTimeError
from .fields import Field

__all__ = ["CronExpr", "CronSyntaxError", "Field", "NoFireTimeError", "parse"]
