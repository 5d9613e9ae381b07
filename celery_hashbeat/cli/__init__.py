"""The ``hashbeat`` command line: operators' tools, one module per command."""

from __future__ import annotations

import click

from .explain import explain


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="celery-hashbeat")
def main() -> None:
    """Inspect hash-cron schedules and the celery_hashbeat scheduler."""


main.add_command(explain)
