"""``hashbeat entries``: every entry the beats plan, from beat_schedule and from the store
(docs/design.md §13), with what operators need before they change one: its schedule, whether it is
paused and why, its next slot and its last outcome. ``hashbeat show`` reuses these words."""

from __future__ import annotations

import time

import click

from celery_hashbeat.cli.admin import opened_admin
from celery_hashbeat.cli.loading import app_option
from celery_hashbeat.cli.output import echo_json, json_option, relative, table
from celery_hashbeat.cli.show import paused_word, view_json
from celery_hashbeat.control.words import entry_schedule_text, stamp


@click.command("entries")
@app_option
@json_option
def entries(app_name: str | None, as_json: bool) -> None:
    """List every entry: those of beat_schedule (source config) and those added at run time
    (source store), each with its schedule, whether it is paused and why, its next slot and
    its last outcome. hashbeat show NAME tells one entry in full.

    \b
    Examples:
      hashbeat entries -A proj
      hashbeat entries -A proj --json
    """
    with opened_admin(app_name) as admin:
        views = admin.list()
    if as_json:
        echo_json([view_json(view) for view in views])
        return
    now = int(time.time() * 1000)
    rows = [
        [
            view.name,
            view.source,
            "unreadable (hashbeat show NAME)"
            if "unreadable" in view.definition
            else entry_schedule_text(view.definition),
            paused_word(view),
            f"{stamp(view.next_slots[0])} ({relative(view.next_slots[0], now)})"
            if view.next_slots
            else "- (paused)"
            if view.paused
            else "-",
            f"{view.recent[0].outcome} {relative(view.recent[0].at, now)}" if view.recent else "",
        ]
        for view in views
    ]
    headers = ["NAME", "SOURCE", "SCHEDULE", "PAUSED", "NEXT SLOT", "LAST OUTCOME"]
    click.echo(table(headers, rows))
