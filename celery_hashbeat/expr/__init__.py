"""The hash-cron engine: text and a key in, fire times out. It imports nothing of Celery."""

from celery_hashbeat.expr.cronexpr import CronExpr, parse
from celery_hashbeat.expr.errors import CronSyntaxError, NoFireTimeError
from celery_hashbeat.expr.fields import Field

__all__ = ["CronExpr", "CronSyntaxError", "Field", "NoFireTimeError", "parse"]
