"""``hashbeat audit [NAME]``: who changed what in the schedule, when and why, newest first
(docs/design.md §19), as the store's audit trail keeps it."""

from __future__ import annotations

from typing import Any

import click

from celery_hashbeat.cli.admin import opened_admin
from celery_hashbeat.cli.loading import app_option
from celery_hashbeat.cli.output import echo_json, json_option, stamp_iso, table
from celery_hashbeat.control.audit import Change
from celery_hashbeat.control.words import stamp


@click.command()
@click.argument("name", required=False)
@app_option
@click.option(
    "--limit", type=click.IntRange(min=1), default=50, show_default=True, help="At most N changes."
)
@json_option
def audit(name: str | None, app_name: str | None, limit: int, as_json: bool) -> None:
    """Show the audit trail: every operator change (add, update, remove, pause, resume,
    trigger, backfill), or entry NAME's, newest first: when, who, what, the reason. --json
    adds each change's record before and after.

    \b
    Examples:
      hashbeat audit -A proj
      hashbeat audit nightly-report -A proj --json
    """
    with opened_admin(app_name) as admin:
        changes = admin.audit(name, limit)
    if as_json:
        echo_json([change_json(change) for change in changes])
        return
    if not changes:
        click.echo("no changes recorded" + (f" for {name!r}" if name else ""))
        return
    rows = [(stamp(c.at_ms), c.action, c.name, str(c.who), c.reason or "-") for c in changes]
    click.echo(table(("WHEN", "ACTION", "ENTRY", "WHO", "REASON"), rows))


def change_json(change: Change) -> dict[str, Any]:
    """One change for scripts: its record with ``at`` in ISO 8601."""
    data = change.as_json()
    data["at"] = stamp_iso(change.at_ms)
    return data
