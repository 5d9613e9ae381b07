"""The console's WSGI app without a browser: reading needs nothing, acting needs the token and a
form from the console's own page, and refusals land beside the field they are about. The store is
a real Redis; what changed is read back through ScheduleAdmin."""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import urllib.request

import pytest
from celery import Celery
from werkzeug.test import Client, TestResponse

from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.expr.cronexpr import parse
from celery_hashbeat.schedules import hashcron
from celery_hashbeat.web.app import ConsoleApp
from celery_hashbeat.web.console import PlanCache
from tests.support.beat_fixtures import Clock
from tests.web.conftest import TOKEN


def csrf_of(page: TestResponse) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page.get_data(as_text=True))
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def signed_in(console: ConsoleApp) -> tuple[Client, str]:
    client = Client(console)
    token = csrf_of(client.get("/login"))
    answer = client.post("/login", data={"csrf": token, "token": TOKEN, "next": "/"})
    assert answer.status_code == 303
    return client, token


def test_the_entries_page_shows_every_entry_with_its_h_values_resolved(
    console: ConsoleApp,
) -> None:
    page = Client(console).get("/").get_data(as_text=True)
    assert page.count("<tr>") >= 2
    for name, expression in (("nightly", "H H * * *"), ("stored-report", "H/15 * * * *")):
        assert f">{name}</a>" in page
        assert f"<code>{parse(expression, key=name)}</code>" in page


def test_an_entrys_page_draws_when_it_and_its_shape_fire(console: ConsoleApp) -> None:
    page = Client(console).get("/entry?name=stored-report").get_data(as_text=True)
    svg = re.search(r"<svg.*?</svg>", page, re.S)
    assert svg, "no spread picture"
    own = re.findall(r'class="own"', svg.group(0))
    assert len(own) == 4  # "H/15 * * * *" fires four times in the hour the picture spans


def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
    console: ConsoleApp, admin: ScheduleAdmin
) -> None:
    client, _ = signed_in(console)
    answer = client.post("/act", data={"name": "nightly", "action": "pause", "reason": "x"})
    assert answer.status_code == 403
    assert "CSRF" in answer.get_data(as_text=True)
    assert not admin.get("nightly").paused


def test_an_action_without_the_token_is_refused_and_changes_nothing(
    console: ConsoleApp, admin: ScheduleAdmin
) -> None:
    client = Client(console)
    token = csrf_of(client.get("/login"))
    wrong = client.post("/login", data={"csrf": token, "token": "guess", "next": "/"})
    assert wrong.status_code == 403
    answer = client.post("/act", data={"csrf": token, "name": "nightly", "action": "trigger"})
    assert answer.status_code == 403
    assert "log in" in answer.get_data(as_text=True).lower()
    assert admin.store.triggers() == []


def test_a_console_without_a_token_only_reads(shop: object, admin: ScheduleAdmin) -> None:
    console = ConsoleApp(admin.app, token=None)
    client = Client(console)
    token = csrf_of(client.get("/login"))
    refused = client.post("/login", data={"csrf": token, "token": "", "next": "/"})
    assert refused.status_code == 403
    answer = client.post("/act", data={"csrf": token, "name": "nightly", "action": "pause"})
    assert answer.status_code == 403
    assert "without a token" in answer.get_data(as_text=True)
    assert not admin.get("nightly").paused


def test_a_signed_in_pause_reaches_the_store_with_its_reason(
    console: ConsoleApp, admin: ScheduleAdmin
) -> None:
    client, token = signed_in(console)
    data = {"csrf": token, "name": "nightly", "action": "pause", "reason": "supplier outage"}
    assert client.post("/act", data=data).status_code == 303
    view = admin.get("nightly")
    assert view.paused
    assert view.pause is not None
    assert view.pause.reason == "supplier outage"
    (change,) = admin.audit("nightly")
    assert (change.action, change.who.user, change.reason) == (
        "pause",
        "console",
        "supplier outage",
    )
    page = client.get("/entry?name=nightly").get_data(as_text=True)
    audit = page[page.index('id="audit-heading"') :]
    assert "supplier outage" in audit and "console (" in audit
    row = re.search(
        r'name=nightly">nightly</a></th>(.*?)</tr>', client.get("/").get_data(as_text=True), re.S
    )
    assert row, "no row for nightly"
    assert "supplier outage" in row.group(1)
    assert "by console (" in row.group(1), "the entries page does not say who paused it"


def test_a_bad_expression_is_shown_beside_the_schedule_field_and_nothing_is_stored(
    console: ConsoleApp, admin: ScheduleAdmin
) -> None:
    client, token = signed_in(console)
    form = {"csrf": token, "name": "bad-one", "task": "shop.report", "kind": "hashcron"}
    answer = client.post("/new", data={**form, "schedule": "H 25 * * *"})
    assert answer.status_code == 400
    error = re.search(r'id="schedule-error"[^>]*>([^<]+)<', answer.get_data(as_text=True))
    assert error, "no error beside the schedule field"
    assert "25" in error.group(1)
    assert "bad-one" not in [view.name for view in admin.list()]


def test_an_unregistered_task_is_shown_beside_the_task_field(
    console: ConsoleApp, admin: ScheduleAdmin
) -> None:
    client, token = signed_in(console)
    form = {"csrf": token, "name": "typo", "task": "shop.reprot", "kind": "hashcron"}
    answer = client.post("/new", data={**form, "schedule": "H * * * *"})
    assert answer.status_code == 400
    assert re.search(r'id="task-error"[^>]*>[^<]*shop\.reprot', answer.get_data(as_text=True))


def test_listening_beyond_this_machine_without_a_token_is_refused_with_the_fix() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "celery_hashbeat",
            "web",
            "-A",
            "tests.web.webapp",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HASHBEAT_WEB_TOKEN": ""},
    )
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0" in done.stderr
    assert "hashbeat_web_token" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_edit_made_from_a_stale_form_is_refused_and_the_other_change_is_kept(
    console: ConsoleApp, admin: ScheduleAdmin
) -> None:
    client, token = signed_in(console)
    page = client.get("/edit?name=stored-report").get_data(as_text=True)
    revision = re.search(r'name="revision" value="(\d+)"', page)
    assert revision, "the edit form does not carry the revision it was read at"
    admin.update("stored-report", schedule=hashcron("H/30 * * * *"))  # someone else, meanwhile
    form = {"csrf": token, "revision": revision.group(1), "task": "shop.report"}
    answer = client.post(
        "/edit?name=stored-report", data={**form, "kind": "hashcron", "schedule": "H 3 * * *"}
    )
    assert answer.status_code == 400
    assert "was not updated" in answer.get_data(as_text=True)
    assert admin.get("stored-report").definition["schedule"] == {"hashcron": "H/30 * * * *"}


def test_an_edit_keeps_what_the_form_does_not_show_and_drops_what_it_empties(
    console: ConsoleApp, admin: ScheduleAdmin
) -> None:
    admin.update(
        "stored-report",
        options={"queue": "reports", "expires": 60},
        exclude=["sat,sun"],
        on_excluded="next_business_day",
    )
    client, token = signed_in(console)
    form = {"csrf": token, "task": "shop.report", "kind": "hashcron", "schedule": "H 3 * * *"}
    answer = client.post("/edit?name=stored-report", data={**form, "on_excluded": ""})
    assert answer.status_code == 303, answer.get_data(as_text=True)
    stored = admin.get("stored-report").definition
    assert stored["schedule"] == {"hashcron": "H 3 * * *"}
    assert stored["options"] == {"expires": 60}  # the queue emptied, expires kept
    assert "exclude" not in stored
    assert "on_excluded" not in stored
    assert admin.audit("stored-report")[0].who.user == "console"
    assert client.get("/edit?name=no-such-entry").status_code == 404
    assert client.get("/edit?name=nightly").status_code == 404  # beat_schedule's: not here


def test_hashbeat_web_serves_the_entries_page_over_http() -> None:
    env = {**os.environ, "HASHBEAT_WEB_TOKEN": "t0ken", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "celery_hashbeat", "web", "-A", "tests.web.webapp"]
    server = subprocess.Popen(
        [*command, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, f"no address in {line!r}"
        with urllib.request.urlopen(url.group(0), timeout=30) as answer:
            page = answer.read().decode()
        assert answer.status == 200
        assert ">nightly</a>" in page
        assert "Log in to act" in page
    finally:
        server.terminate()
        server.wait(timeout=30)


def next_slot_of(page: str, name: str) -> str:
    row = re.search(rf">{re.escape(name)}</a></th>(.*?)</tr>", page, re.S)
    assert row, f"no row for {name}"
    found = re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", row.group(1))
    assert found, f"no next slot for {name}"
    return found.group(0)


def test_the_kept_plan_follows_the_clock_and_changes_made_elsewhere(
    console: ConsoleApp, admin: ScheduleAdmin
) -> None:
    clock = Clock()
    console.admin.clock = clock
    client = Client(console)
    first = next_slot_of(client.get("/").get_data(as_text=True), "stored-report")
    clock.advance(15 * 60)  # "H/15 * * * *": its next slot has come and gone
    later = next_slot_of(client.get("/").get_data(as_text=True), "stored-report")
    assert later > first
    admin.pause("stored-report", "changed elsewhere")  # another operator, through the CLI
    page = client.get("/").get_data(as_text=True)
    assert "paused: changed elsewhere" in page
    admin.resume("stored-report")
    resumed = next_slot_of(client.get("/").get_data(as_text=True), "stored-report")
    assert resumed >= later
    admin.update("stored-report", schedule=hashcron("H H * * *"))  # a new definition
    page = client.get("/").get_data(as_text=True)
    assert f"<code>{parse('H H * * *', key='stored-report')}</code>" in page


def test_changes_made_elsewhere_are_taken_into_the_kept_plan_without_building_it_again(
    console: ConsoleApp, admin: ScheduleAdmin, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = []
    plan = console.admin.plan
    monkeypatch.setattr(console.admin, "plan", lambda *given: built.append(1) or plan(*given))
    client = Client(console)
    client.get("/")
    admin.pause("nightly", "kept")
    assert "paused: kept" in client.get("/").get_data(as_text=True)
    admin.update("stored-report", schedule=hashcron("H H * * *"))
    page = client.get("/").get_data(as_text=True)
    assert f"<code>{parse('H H * * *', key='stored-report')}</code>" in page
    admin.add("a-first-report", "shop.report", hashcron("H * * * *"))
    page = client.get("/").get_data(as_text=True)
    names = re.findall(r'href="/entry\?name=([\w-]+)"', page)
    assert names.index("a-first-report") < names.index("nightly"), "rows not in order of name"
    assert next_slot_of(page, "a-first-report")
    admin.remove("stored-report")
    assert "stored-report" not in client.get("/").get_data(as_text=True)
    assert len(built) == 1, "the kept plan was built again for a change"


def test_the_kept_plan_followed_through_changes_plans_as_a_fresh_one(
    shop: Celery, admin: ScheduleAdmin
) -> None:
    """Balanced entries share a shape's values: one added can move another's (b-6 moves b-3
    here), which the kept plan must plan again although no change names it."""
    shop.conf.hashbeat_balance = True
    kept, reading = PlanCache(), ScheduleAdmin(shop)
    for index in range(5):
        admin.add(f"b-{index}", "shop.report", hashcron("H(0-3) * * * *"))
    admin.add("other", "shop.report", hashcron("H * * * *"))
    kept.views(reading, kept.planned(reading), int(reading.clock() * 1000))
    before = {view.name: view.next_slots for view in reading.list(recent=0, slots=1)}
    admin.add("b-6", "shop.report", hashcron("H(0-3) * * * *"))
    admin.remove("stored-report")
    admin.update("other", schedule=hashcron("H H * * *"))
    admin.pause("b-0", "held")
    planned = kept.planned(reading)
    now = int(reading.clock() * 1000)
    followed = {view.name: view.next_slots for view in kept.views(reading, planned, now)}
    fresh = {view.name: view.next_slots for view in reading.list(recent=0, slots=1)}
    assert followed == fresh
    assert before["b-3"] != fresh["b-3"], "no entry was moved by another's arrival"
    reading.close()


def test_an_entrys_page_marks_slots_its_calendar_moved_and_lists_those_it_left_out(
    console: ConsoleApp, admin: ScheduleAdmin
) -> None:
    admin.add(
        "weekly",
        "shop.report",
        hashcron("0 9 * * 6", exclude=["sat,sun"], on_excluded="next_business_day"),
    )
    admin.add("midweek", "shop.report", hashcron("0 9 * * 0,3", exclude=["sun"]))
    page = Client(console).get("/entry?name=weekly").get_data(as_text=True)
    moved = re.findall(r'class="moved">moved from (\d{4}-\d\d-\d\d) 09:00', page)
    assert len(moved) == 10  # every slot shown is a Saturday's, on the Monday after it
    assert all(datetime.date.fromisoformat(day).weekday() == 5 for day in moved)
    assert "Left out by its calendar" not in page
    page = Client(console).get("/entry?name=midweek").get_data(as_text=True)
    assert 'class="moved"' not in page
    left = re.search(r'class="left-out">(.*?)</dd>', page)
    assert left, "the Sundays left out are not listed"
    days = re.findall(r"(\d{4}-\d\d-\d\d) 09:00", left.group(1))
    assert days and all(datetime.date.fromisoformat(day).weekday() == 6 for day in days)
