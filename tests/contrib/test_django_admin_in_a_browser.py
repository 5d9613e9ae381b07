"""Hashbeat entries in the Django admin, in a real headless Chromium: a staff user logs in with
Django's own form, finds the entry, pauses it with a reason; the store has the pause."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from celery_hashbeat.control.admin import ScheduleAdmin
from tests.contrib.conftest import make_user
from tests.support.browser import browser, by_label, click, screenshot, shows
from tests.support.serving import served

__all__ = ["browser"]


@pytest.fixture
def django_site(hashbeat_app: Celery) -> Iterator[str]:
    from django.contrib.staticfiles.handlers import (  # noqa: PLC0415 - needs the settings
        StaticFilesHandler,
    )
    from django.core.wsgi import get_wsgi_application  # noqa: PLC0415 - needs the settings

    with served(StaticFilesHandler(get_wsgi_application())) as url:
        yield url


def test_a_staff_user_pauses_an_entry_from_the_django_admin(
    browser: Any, django_site: str, admin: ScheduleAdmin
) -> None:
    make_user("ops", "view_entry", "change_entry", "trigger_entry")
    browser.get(django_site + "/admin/")
    by_label(browser, "Username:").send_keys("ops")
    by_label(browser, "Password:").send_keys("pw-ops")
    browser.find_element("xpath", "//input[@type='submit']").click()
    click(browser, "Hashbeat entries")
    screenshot(browser, "console-django-admin")
    click(browser, "stored-report")
    by_label(browser, "Reason for pausing").send_keys("vendor maintenance")
    browser.find_element("xpath", "//input[@value='Pause']").click()
    assert shows(browser, "paused stored-report: vendor maintenance")
    view = admin.get("stored-report")
    assert view.paused
    assert view.pause is not None
    assert view.pause.reason == "vendor maintenance"
