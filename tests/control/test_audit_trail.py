"""The audit trail (docs/design.md §19) through ScheduleAdmin: the user a caller names (the
console's Django user) and the store's user are recorded beside the process's own."""

from __future__ import annotations

from datetime import timedelta

from celery import Celery

from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.audit import who_am_i
from tests.control.fixtures import report

EVERY_MINUTE = timedelta(minutes=1)


def test_the_user_a_caller_names_is_recorded_with_each_change(
    app: Celery, admin: ScheduleAdmin
) -> None:
    console = ScheduleAdmin(app, admin.store, who="alice")
    console.add("report", task="shop.report", schedule=EVERY_MINUTE, reason="ticket 12")
    admin.pause("report", reason="by hand")
    newest, oldest = admin.audit("report")
    assert (oldest.action, oldest.who.user, oldest.reason) == ("add", "alice", "ticket 12")
    assert (newest.action, newest.who.user, newest.reason) == ("pause", "", "by hand")
    assert "alice" in str(oldest.who) and "alice" not in str(newest.who)


def test_the_trail_of_one_entry_leaves_the_others_out(app: Celery, admin: ScheduleAdmin) -> None:
    app.task(name="shop.report")(report)
    admin.add("a", task="shop.report", schedule=EVERY_MINUTE)
    admin.add("b", task="shop.report", schedule=EVERY_MINUTE)
    admin.remove("a")
    assert [(c.action, c.name) for c in admin.audit("a")] == [("remove", "a"), ("add", "a")]
    assert [c.name for c in admin.audit()] == ["a", "b", "a"]
    assert [c.name for c in admin.audit(limit=1)] == ["a"]


def test_the_store_user_is_the_one_the_store_url_names() -> None:
    url = "redis://ops-admin:secret@redis.internal:6379/0"
    assert who_am_i(None, url).store_user == "ops-admin"
    assert who_am_i(None, "redis://redis.internal:6379/0").store_user == ""
    assert who_am_i("bob", "sqlite:///beat.sqlite").user == "bob"
