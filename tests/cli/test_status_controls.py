"""``hashbeat status`` lists the entries an operator paused, with why and since when, and the
triggers waiting for a leader (docs/design.md §13), as ScheduleAdmin writes them to the store."""

from __future__ import annotations

import json
from collections.abc import Callable

from click.testing import Result

from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.store import Store
from tests.cli.proj import app

Invoke = Callable[..., Result]


def test_status_shows_paused_entries_and_waiting_triggers(invoke: Invoke, app_store: Store) -> None:
    admin = ScheduleAdmin(app, store=app_store)
    admin.pause("sync", reason="supplier outage")
    admin.trigger("sync")
    admin.trigger("sync")
    result = invoke("status", "-A", "tests.cli.proj")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "paused    1 entry" in lines
    row = next(line for line in lines if line.startswith("  sync ") and "outage" in line)
    assert "supplier outage" in row and "ago" in row
    assert "triggers  2 waiting for a leader to send them" in lines
    shown = json.loads(invoke("status", "-A", "tests.cli.proj", "--json").output)
    assert shown["paused"]["sync"]["reason"] == "supplier outage"
    assert shown["triggers_waiting"] == 2
    admin.resume("sync")
    shown = json.loads(invoke("status", "-A", "tests.cli.proj", "--json").output)
    assert shown["paused"] == {}
