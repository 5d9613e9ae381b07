"""``hashbeat backfill NAME --from T1 --to T2``: send an entry's past slots that were not sent
(docs/design.md §19), through ScheduleAdmin.backfill, so that the CLI checks exactly what Python
callers get checked."""

from __future__ import annotations

import click

from celery_hashbeat.cli.admin import opened_admin
from celery_hashbeat.cli.changes import REASON
from celery_hashbeat.cli.loading import app_option
from celery_hashbeat.cli.output import echo_json, json_option, table
from celery_hashbeat.control.backfill import BACKFILL_LIMIT
from celery_hashbeat.control.words import stamp


@click.command()
@click.argument("name")
@app_option
@click.option("--from", "start", required=True, help="The first instant, ISO 8601 with a zone.")
@click.option("--to", "end", required=True, help="The last instant, ISO 8601 with a zone.")
@click.option("--dry-run", is_flag=True, help="List the slots and which were sent; send none.")
@click.option(
    "--yes", is_flag=True, help=f"Confirm a backfill of more than {BACKFILL_LIMIT:,} slots."
)
@REASON
@json_option
def backfill(
    name: str,
    app_name: str | None,
    start: str,
    end: str,
    dry_run: bool,
    yes: bool,
    reason: str,
    as_json: bool,
) -> None:
    """Send entry NAME's slots from --from to --to (both included) that were not sent: the
    leader sends each once, with the slot's own task id, as the entry's overlap allows. Slots
    that the beats or an earlier backfill sent are not sent again. The store knows what was
    sent for 7 days back (and only since this release first ran): an earlier --from is
    refused.

    \b
    Examples:
      hashbeat backfill report -A proj --from 2026-05-01T00:00Z --to 2026-05-03T00:00Z --dry-run
      hashbeat backfill report -A proj --from 2026-05-01T00:00Z --to 2026-05-03T00:00Z
    """
    with opened_admin(app_name) as admin:
        done = admin.backfill(
            name, start, end, dry_run=dry_run, reason=reason, limit=None if yes else BACKFILL_LIMIT
        )
    if as_json:
        echo_json({**done.as_json(), "dry_run": dry_run})
        return
    already = len(done.slots) - len(done.to_send)
    summary = (
        f"{len(done.to_send)} slot(s) to send of {len(done.slots)} from {stamp(done.start_ms)} "
        f"to {stamp(done.end_ms)} ({already} sent already)"
    )
    if not dry_run:
        click.echo(f"queued backfill {done.request} of {name!r}: {summary}; the leader sends them")
        return
    click.echo(f"dry run of a backfill of {name!r}: {summary}; nothing queued")
    if done.slots:
        rows = [(stamp(slot), "yes" if slot in done.sent else "no") for slot in done.slots]
        click.echo(table(("SLOT", "SENT"), rows))
