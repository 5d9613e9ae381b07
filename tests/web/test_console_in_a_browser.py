"""The console in a real headless Chromium, as a person uses it: find by visible labels, click,
then check the store through ScheduleAdmin and the broker queue a real in-process beat fills.
A pause from the page stops the sends; a trigger from the page sends exactly one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from celery import Celery
from selenium.webdriver.support.ui import Select

from celery_hashbeat import Scheduler
from celery_hashbeat.control import polling
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.publish.message import TRIGGER_HEADER
from celery_hashbeat.schedules import hashcron
from celery_hashbeat.web import make_app
from tests.support.beat_fixtures import Broker, run_for
from tests.support.browser import browser, by_label, click, screenshot, shows
from tests.support.serving import served
from tests.web.conftest import TOKEN

__all__ = ["browser"]


@pytest.fixture
def site(shop: Celery, admin: ScheduleAdmin) -> Iterator[str]:
    shop.conf.beat_schedule = {
        **shop.conf.beat_schedule,
        "pulse": {"task": "shop.report", "schedule": 1.0},
    }
    for index in range(3):
        admin.add(f"tenant-{index}-sync", "shop.report", hashcron("H * * * *"))
    console = make_app(shop, token=TOKEN)
    with served(console) as url:
        yield url
    console.admin.close()


def log_in(driver: Any, url: str) -> None:
    driver.get(url + "/")
    click(driver, "Log in to act")
    by_label(driver, "Console token").send_keys(TOKEN)
    click(driver, "Log in")


def test_a_pause_from_the_page_stops_the_sends_and_a_trigger_sends_exactly_one(
    browser: Any,
    site: str,
    admin: ScheduleAdmin,
    broker: Broker,
    schedulers: Callable[..., Scheduler],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(polling, "POLL_S", 0.05)
    beat = schedulers()
    run_for(beat, 3, until=lambda: len(broker.headers()) >= 2)
    assert broker.new(), "the beat sent nothing before the pause"

    log_in(browser, site)
    click(browser, "pulse")
    by_label(browser, "Reason for pausing").send_keys("supplier outage")
    click(browser, "Pause")
    assert shows(browser, "paused pulse: supplier outage")
    view = admin.get("pulse")
    assert view.paused
    assert view.pause is not None
    assert view.pause.reason == "supplier outage"

    run_for(beat, 1)  # the leader reads the pause
    broker.new()
    run_for(beat, 2.5)
    assert [h for h in broker.new() if h["hashbeat_entry"] == "pulse"] == []

    click(browser, "Trigger one run now")
    assert shows(browser, "triggered pulse")
    run_for(beat, 2.5)
    sent = [h for h in broker.new() if h["hashbeat_entry"] == "pulse"]
    assert len(sent) == 1
    assert TRIGGER_HEADER in sent[0]
    click(browser, "Entries")
    screenshot(browser, "console-entries")
    # The docs' picture of an entry's page: one of three entries of a shape, triggered once.
    click(browser, "tenant-0-sync")
    click(browser, "Trigger one run now")
    assert shows(browser, "triggered tenant-0-sync")
    run_for(beat, 1.5, until=lambda: bool(admin.recent("tenant-0-sync")))
    browser.refresh()
    screenshot(browser, "console-entry")


def new_entry(driver: Any, name: str) -> None:
    """Open the form to add an entry, and type its name and task."""
    click(driver, "Add an entry")
    by_label(driver, "Name").send_keys(name)
    by_label(driver, "Task").send_keys("shop.report")


def error_beside(driver: Any, control: Any) -> str:
    """The text of the error a field's ``aria-describedby`` names (its help is named too)."""
    ids = (control.get_attribute("aria-describedby") or "").split()
    errors = [driver.find_element("id", each).text for each in ids if each.endswith("-error")]
    assert errors, "no error is tied to the field"
    return errors[0]


def test_a_form_error_is_shown_beside_its_field_and_a_fixed_entry_is_stored(
    browser: Any, site: str, admin: ScheduleAdmin
) -> None:
    log_in(browser, site)
    new_entry(browser, "eu-report")
    schedule = by_label(browser, "Schedule")
    schedule.send_keys("H 25 * * *")
    click(browser, "Add entry")
    assert shows(browser, "out of range")  # the refusal, on the page that comes back
    schedule = by_label(browser, "Schedule")
    assert "25" in error_beside(browser, schedule)
    assert "eu-report" not in [view.name for view in admin.list()]

    schedule.clear()
    schedule.send_keys("H 6 * * *")
    click(browser, "Add entry")
    assert shows(browser, "added eu-report")
    stored = admin.get("eu-report")
    assert stored.source == "store"
    assert stored.definition["schedule"] == {"hashcron": "H 6 * * *"}


def test_days_not_to_fire_on_and_a_one_shot_are_added_through_the_form(
    browser: Any, site: str, admin: ScheduleAdmin
) -> None:
    log_in(browser, site)
    new_entry(browser, "xmas-report")
    by_label(browser, "Schedule").send_keys("H 6 * * *")
    by_label(browser, "Days not to fire on (one a line)").send_keys("*-12-25\nfunday")
    Select(by_label(browser, "On a day not to fire on")).select_by_visible_text("next business day")
    click(browser, "Add entry")
    assert shows(browser, "neither a date nor a weekday")
    exclude = by_label(browser, "Days not to fire on (one a line)")
    assert "funday" in error_beside(browser, exclude)
    assert exclude.get_attribute("value") == "*-12-25\nfunday"  # nothing typed is lost
    assert by_label(browser, "Name").get_attribute("value") == "xmas-report"
    assert by_label(browser, "Schedule").get_attribute("value") == "H 6 * * *"
    chosen = Select(by_label(browser, "On a day not to fire on")).first_selected_option
    assert chosen.text == "next business day"
    assert "xmas-report" not in [view.name for view in admin.list()]

    exclude.clear()
    exclude.send_keys("*-12-25\nsat,sun")
    click(browser, "Add entry")
    assert shows(browser, "added xmas-report")
    stored = admin.get("xmas-report").definition
    assert stored["exclude"] == ["*-12-25", "sat,sun"]
    assert stored["on_excluded"] == "next_business_day"
    # the entry's page shows them with its schedule
    assert shows(browser, "H 6 * * *, excluding *-12-25; sat,sun (next_business_day)")

    click(browser, "Entries")
    new_entry(browser, "launch")
    at = by_label(browser, "One-shot at")
    at.send_keys("2031-01-01T09:00:00")
    click(browser, "Add entry")
    assert shows(browser, "no time zone")
    at = by_label(browser, "One-shot at")
    assert "give it one" in error_beside(browser, at)
    at.send_keys("+01:00")
    click(browser, "Add entry")
    assert shows(browser, "added launch")
    launch = admin.get("launch")
    assert launch.definition["schedule"] == {"at": "2031-01-01T09:00:00+01:00"}
    assert launch.next_slots == [1925020800000]  # 2031-01-01 08:00 UTC

    browser.set_window_size(390, 844)  # a phone: the pages fit its width (tables scroll)
    for page in ("/", "/entry?name=xmas-report", "/new"):
        browser.get(site + page)
        wide, shown = browser.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]"
        )
        assert wide <= shown, f"{page} is {wide}px wide in a {shown}px window"
