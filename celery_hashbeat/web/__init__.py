"""The console: a web page to see and steer the schedule (docs/design.md §18, docs/console.md)."""

from celery_hashbeat.web.app import make_app

__all__ = ["make_app"]
