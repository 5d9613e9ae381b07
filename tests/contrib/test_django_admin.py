"""Hashbeat entries in the Django admin, through Django's test client: the list reads the store,
actions need Django's permissions (a staff user without them cannot act) and Django's CSRF, and
what they change is read back through ScheduleAdmin."""

from __future__ import annotations

import re
from typing import Any

from celery import Celery

from celery_hashbeat.control.admin import ScheduleAdmin
from tests.contrib.conftest import make_user

LIST = "/admin/hashbeat/entry/"
ACT = "/admin/hashbeat/entry/act/"


def client_for(user: Any, **options: Any) -> Any:
    from django.test import Client  # noqa: PLC0415 - needs the settings

    client = Client(**options)
    client.force_login(user)
    return client


def test_the_admin_lists_the_stores_entries_for_a_user_who_may_view(
    hashbeat_app: Celery,
) -> None:
    page = client_for(make_user("viewer", "view_entry")).get(LIST)
    assert page.status_code == 200
    text = page.content.decode()
    assert "nightly" in text
    assert "stored-report" in text
    assert (
        'value="Pause"'
        not in client_for(make_user("viewer2", "view_entry"))
        .get("/admin/hashbeat/entry/entry/?name=nightly")
        .content.decode()
    )


def test_a_staff_user_without_the_permission_cannot_act(
    hashbeat_app: Celery, admin: ScheduleAdmin
) -> None:
    client = client_for(make_user("looker", "view_entry"))
    paused = client.post(ACT, {"name": "nightly", "action": "pause", "reason": "x"})
    assert paused.status_code == 403
    triggered = client.post(ACT, {"name": "nightly", "action": "trigger"})
    assert triggered.status_code == 403
    assert not admin.get("nightly").paused
    assert admin.store.triggers() == []


def test_the_trigger_permission_alone_triggers_but_does_not_pause(
    hashbeat_app: Celery, admin: ScheduleAdmin
) -> None:
    client = client_for(make_user("runner", "view_entry", "trigger_entry"))
    assert client.post(ACT, {"name": "nightly", "action": "trigger"}).status_code == 302
    assert len(admin.store.triggers()) == 1
    assert client.post(ACT, {"name": "nightly", "action": "pause"}).status_code == 403
    assert not admin.get("nightly").paused


def test_a_post_without_djangos_csrf_token_is_refused(
    hashbeat_app: Celery, admin: ScheduleAdmin
) -> None:
    client = client_for(
        make_user("operator", "view_entry", "change_entry"), enforce_csrf_checks=True
    )
    answer = client.post(ACT, {"name": "nightly", "action": "pause", "reason": "x"})
    assert answer.status_code == 403
    assert not admin.get("nightly").paused


def test_a_user_with_the_change_permission_pauses_and_the_store_has_the_reason(
    hashbeat_app: Celery, admin: ScheduleAdmin
) -> None:
    client = client_for(make_user("operator2", "view_entry", "change_entry"))
    answer = client.post(ACT, {"name": "stored-report", "action": "pause", "reason": "audit"})
    assert answer.status_code == 302
    view = admin.get("stored-report")
    assert view.paused
    assert view.pause is not None
    assert view.pause.reason == "audit"
    change = admin.audit("stored-report")[0]  # the newest: the fixture added the entry
    assert (change.action, change.who.user, change.reason) == ("pause", "django:operator2", "audit")
    page = client.get("/admin/hashbeat/entry/entry/?name=stored-report").content.decode()
    assert "django:operator2 (" in page[page.index("Audit trail") :]
    assert "by django:operator2 (" in page[: page.index("Audit trail")]  # who paused it


NEW = "/admin/hashbeat/entry/new/"


def test_a_user_with_the_change_permission_adds_and_edits_entries_through_the_form(
    hashbeat_app: Celery, admin: ScheduleAdmin
) -> None:
    client = client_for(make_user("editor", "view_entry", "change_entry"))
    assert "Days not to fire on" in client.get(NEW).content.decode()
    form = {"name": "django-report", "task": "shop.report", "kind": "hashcron"}
    refused = client.post(NEW, {**form, "schedule": "H 5 * * *", "exclude": "funday"})
    assert refused.status_code == 400
    text = refused.content.decode()
    assert re.search(r'id="exclude-error"[^>]*>[^<]*funday', text), "no error beside exclude"
    assert ">funday</textarea>" in text  # what was typed is kept
    assert "django-report" not in [view.name for view in admin.list()]

    added = client.post(NEW, {**form, "schedule": "H 5 * * *", "exclude": "sat,sun"})
    assert added.status_code == 302
    assert admin.get("django-report").definition["exclude"] == ["sat,sun"]
    page = client.get("/admin/hashbeat/entry/entry/?name=django-report").content.decode()
    assert "H 5 * * *, excluding sat,sun" in page
    assert "&quot;shop.report&quot;" in page  # the definition's other fields
    change = admin.audit("django-report")[0]
    assert (change.action, change.who.user) == ("add", "django:editor")

    edit = "/admin/hashbeat/entry/edit/?name=django-report"
    assert 'value="H 5 * * *"' in client.get(edit).content.decode()
    assert client.post(edit, {**form, "schedule": "H 6 * * *"}).status_code == 302
    stored = admin.get("django-report").definition
    assert stored["schedule"] == {"hashcron": "H 6 * * *"}
    assert "exclude" not in stored  # emptied in the form


def test_a_user_who_may_only_view_cannot_add_an_entry(
    hashbeat_app: Celery, admin: ScheduleAdmin
) -> None:
    client = client_for(make_user("reader", "view_entry"))
    assert client.get(NEW).status_code == 403
    form = {"name": "sneaky", "task": "shop.report", "kind": "hashcron", "schedule": "H * * * *"}
    assert client.post(NEW, form).status_code == 403
    assert "sneaky" not in [view.name for view in admin.list()]
