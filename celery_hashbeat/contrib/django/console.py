"""The Celery app and the one ScheduleAdmin the admin pages use, and what they show of a row."""

from __future__ import annotations

import threading
from importlib import import_module
from typing import TYPE_CHECKING, Any, cast

from celery import current_app
from django.conf import settings

from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.web.app import ago, stamp
from celery_hashbeat.web.console import PlanCache

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.web.console import Row

#: One request at a time through the admin (some stores are not shared between threads).
LOCK = threading.Lock()

_admins: dict[int, ScheduleAdmin] = {}

#: The plan kept between requests (web/console.py).
PLANS = PlanCache()


def celery_app() -> Celery:
    """``HASHBEAT_CELERY_APP`` (an app or ``"module:attribute"``), else Celery's current app."""
    given = getattr(settings, "HASHBEAT_CELERY_APP", None)
    if given is None:
        return cast("Celery", cast(Any, current_app)._get_current_object())
    if isinstance(given, str):
        module, _, attribute = given.partition(":")
        return getattr(import_module(module), attribute or "app")  # type: ignore[no-any-return]
    return given  # type: ignore[no-any-return]


def schedule_admin() -> ScheduleAdmin:
    app = celery_app()
    if id(app) not in _admins:
        _admins[id(app)] = ScheduleAdmin(app)
    return _admins[id(app)]


def row_words(row: Row, now_ms: int) -> dict[str, Any]:
    """A row as the admin's template shows it: its instants in words."""
    nxt = row.next_slots[0] if row.next_slots else None
    last = row.last
    return {
        "row": row,
        "next": "-" if nxt is None else f"{stamp(nxt)} ({ago(nxt, now_ms)})",
        "last": "" if last is None else f"{last.outcome} {ago(last.at, now_ms)}",
        "paused": "" if row.paused_at is None else ago(row.paused_at, now_ms),
        "copies": [
            {"row": copy, "next": stamp(copy.next_slots[0]) if copy.next_slots else "-"}
            for copy in row.copies
        ],
    }
