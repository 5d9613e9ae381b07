"""The ``hashbeat`` command line: operators' tools, one module per command."""

from __future__ import annotations

import click

from celery_hashbeat.cli.admin import add, pause, remove, resume, trigger, update
from celery_hashbeat.cli.audit import audit
from celery_hashbeat.cli.backfill import backfill
from celery_hashbeat.cli.entries import entries
from celery_hashbeat.cli.explain import explain
from celery_hashbeat.cli.lint import lint
from celery_hashbeat.cli.output import EXIT_CODES_HELP
from celery_hashbeat.cli.plan import plan
from celery_hashbeat.cli.schedule import schedule_command
from celery_hashbeat.cli.show import show
from celery_hashbeat.cli.spread import spread
from celery_hashbeat.cli.status import status
from celery_hashbeat.cli.web import web

HELP = f"""Inspect hash-cron schedules and the celery_hashbeat scheduler.

The same commands run as `hashbeat COMMAND` and as `celery -A proj hashbeat COMMAND`.
Commands that need the app take -A proj, or the app Celery's own -A loaded.

{EXIT_CODES_HELP}
"""


@click.group(help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="celery-hashbeat")
def main() -> None:
    pass


for command in (
    add,
    audit,
    backfill,
    entries,
    explain,
    lint,
    pause,
    plan,
    remove,
    resume,
    schedule_command,
    show,
    spread,
    status,
    trigger,
    update,
    web,
):
    main.add_command(command)
