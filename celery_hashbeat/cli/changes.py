"""The options that define an entry (``hashbeat add`` and ``update``): read from text into the
definition ScheduleAdmin takes by control/fields.py (the console's form reads its fields there
too), each refusal one line naming the option."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from celery_hashbeat.cli.output import Failure
from celery_hashbeat.control import fields
from celery_hashbeat.control.refusals import AdminError


class Refused(Failure):
    """A change refused: the first line of the reason, with the exit code of its kind (the
    AdminError's: 2 bad input, 3 no such entry, 4 the store, 5 a conflict, 6 not triggered)."""

    exit_code = AdminError.exit_code

    def __init__(self, message: str, exit_code: int = AdminError.exit_code) -> None:
        lines = message.splitlines() or [""]
        if len(lines) > 1:  # an expression error, with the expression and a caret under it
            lines[0] += f", in {lines[1].strip()!r}: check it with hashbeat explain"
        super().__init__(lines[0])
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it per class


#: The options that define an entry, as ``add`` takes them and ``update`` changes them.
DEFINITION_OPTIONS = (
    click.option("--task", metavar="TASK", help="The task's registered name."),
    click.option("--cron", metavar="EXPR", help='A hash-cron expression: hashcron("EXPR").'),
    click.option("--tz", metavar="ZONE", help="The --cron expression's IANA time zone."),
    click.option("--every", metavar="SECONDS", help="A plain interval, as a beat_schedule number."),
    click.option("--interval", metavar="SECONDS", help="hashinterval(SECONDS): a hashed offset."),
    click.option(
        "--at", metavar="ISO", help="A one-shot: fires once at this instant (ISO 8601 with offset)."
    ),
    click.option(
        "--exclude",
        metavar="DAYS",
        multiple=True,
        help="Days not to fire on (repeatable): 2026-12-25, 2026-12-24..2026-12-31, *-12-25, "
        "sat,sun, holidays:US, ical:/path/file.ics.",
    ),
    click.option(
        "--on-excluded",
        metavar="MODE",
        help="skip (default), next_business_day or previous_business_day.",
    ),
    click.option("--args", metavar="JSON", help="Positional arguments, a JSON list."),
    click.option("--kwargs", metavar="JSON", help="Keyword arguments, a JSON object."),
    click.option("--queue", metavar="QUEUE", help="The queue to send to (options.queue)."),
    click.option("--overlap", metavar="MODE", help="allow, skip, buffer_one or replace."),
    click.option("--catch-up", metavar="MODE", help="latest, all or skip."),
    click.option("--catch-up-window", metavar="SECONDS", help="Catch up no slot older than this."),
    click.option(
        "--expires", metavar="SECONDS", help="Workers drop a run that waited longer (options)."
    ),
    click.option("--priority", metavar="N", help="The message's priority (options.priority)."),
    click.option("--start", metavar="ISO", help="No slot before this (ISO 8601 with offset)."),
    click.option("--end", metavar="ISO", help="No slot after this (ISO 8601 with offset)."),
    click.option("--max-runs", metavar="N", help="Stop after N sends, counted in the store."),
    click.option(
        "--workers", metavar="NODES", help="'*' (every live worker) or celery@a,celery@b."
    ),
    click.option("--max-lateness", metavar="SECONDS", help="A send later than this counts late."),
    click.option("--alert-after-failures", metavar="N", help="Alert at N failures in a row."),
    click.option("--pause-after-failures", metavar="N", help="Pause at N failures in a row."),
    click.option("--reason", metavar="TEXT", help="Why: kept in the audit trail."),
    click.option(
        "--allow-unregistered-task",
        is_flag=True,
        help="Accept a task this app does not register (one only the workers import).",
    ),
)

#: What ``update --unset`` may remove.
UNSETTABLE = (
    "args",
    "kwargs",
    "queue",
    "expires",
    "priority",
    "overlap",
    "catch_up",
    "catch_up_window",
    "start",
    "end",
    "max_runs",
    "workers",
    "max_lateness",
    "alert_after_failures",
    "pause_after_failures",
    "exclude",
    "on_excluded",
)

#: An option the commands that change an entry but define none take.
REASON = click.option("--reason", default="", help="Why: kept in the audit trail.")


def definition_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(DEFINITION_OPTIONS):
        function = option(function)
    return function


def bad(name: str, option: str, what: str) -> Refused:
    return Refused(f"entry {name!r}: {option}: {what}")


def read_changes(
    name: str, given: dict[str, Any], current: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The definition fields the options give (control/fields.py reads them), each refusal
    naming its option."""
    try:
        return fields.read_changes(name, given, current)
    except fields.FieldError as exc:
        if exc.whole:
            raise Refused(exc.what) from None
        options = "/".join("--" + field.replace("_", "-") for field in exc.fields)
        raise bad(name, options, exc.what) from None
