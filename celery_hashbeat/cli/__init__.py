"""The ``hashbeat`` command line: operators' tools, one module per command."""

from __future__ import annotations

import click

from .admin import add, pause, remove, resume, trigger, update
from .entries import entries
from .explain import explain
from .lint import lint
from .output import EXIT_CODES_HELP
from .schedule import schedule_command
from .show import show
from .spread import spread
from .status import status

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
    entries,
    explain,
    lint,
    pause,
    remove,
    resume,
    schedule_command,
    show,
    spread,
    status,
    trigger,
    update,
):
    main.add_command(command)
