"""``celery -A proj hashbeat ...``: the same commands inside Celery's own command line.

Registered through the ``celery.commands`` entry point; the app comes from Celery's ``-A``.
"""

from __future__ import annotations

import click

from celery_hashbeat.cli import HELP, main

hashbeat = click.Group(
    name="hashbeat",
    help=HELP,
    commands=main.commands,
    context_settings={"help_option_names": ["-h", "--help"]},
)
