"""The options that define an entry (``hashbeat add`` and ``update``), read from text into the
definition ScheduleAdmin takes, so that every refusal is one line naming the option."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from celery_hashbeat.cli.output import Failure
from celery_hashbeat.control.admin import AdminError
from celery_hashbeat.control.definitions import DefinitionError, schedule_object


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


#: The ``--unset`` fields kept in the entry's publish options.
OPTION_FIELDS = ("queue", "expires", "priority")


def definition_options(function: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(DEFINITION_OPTIONS):
        function = option(function)
    return function


def bad(name: str, option: str, what: str) -> Refused:
    return Refused(f"entry {name!r}: {option}: {what}")


def read_schedule(name: str, given: dict[str, str | None], current: Any = None) -> Any:
    """The schedule the options give (None if none), as the object ScheduleAdmin takes. On an
    update of a hashcron (``current``, its stored data), --cron keeps its time zone and --tz
    alone keeps its expression, so that only what is given changes."""
    chosen = [key for key in ("cron", "every", "interval", "at") if given.get(key) is not None]
    if len(chosen) > 1:
        raise bad(
            name, "--" + "/--".join(chosen), "give only one of --cron, --every, --interval, --at"
        )
    cron = dict(current) if isinstance(current, dict) and "hashcron" in current else None
    tz = given.get("tz")
    if tz is not None and chosen != ["cron"] and (chosen or cron is None):
        raise bad(name, "--tz", "it is the time zone of a --cron expression: give --cron with it")
    if not chosen and tz is None:
        return None
    key = chosen[0] if chosen else "cron"
    text = given.get(key)
    if key == "cron":
        data: dict[str, Any] = {**(cron or {}), "hashcron": text or (cron or {}).get("hashcron")}
        if tz is not None:
            data["tz"] = tz
    elif key == "at":
        data = {"at": text}
    else:
        data = {"every" if key == "every" else "hashinterval": number(name, f"--{key}", text or "")}
    try:
        return schedule_object(name, data)
    except DefinitionError as exc:
        raise Refused(str(exc)) from None


def number(name: str, option: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise bad(name, option, f"{text!r} is not a number of seconds") from None


def whole(name: str, option: str, text: str, least: int) -> int:
    if not text.strip().isdigit() or int(text) < least:
        raise bad(name, option, f"give a whole number of at least {least}, not {text!r}")
    return int(text)


def read_json(name: str, option: str, text: str, kind: type) -> Any:
    """``text`` as JSON of ``kind`` (list or dict), or a refusal with an example."""
    what, example = ("list", "'[42, \"eu\"]'") if kind is list else ("object", "'{\"full\": true}'")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise bad(name, option, f"not JSON ({exc}); give a JSON {what}: {example}") from None
    if not isinstance(value, kind):
        raise bad(name, option, f"give a JSON {what}, such as {example}, not {text}")
    return value


def read_changes(
    name: str, given: dict[str, str | None], current: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The definition fields the options give, as ScheduleAdmin takes them; ``current`` is
    the stored definition an update changes."""
    current = current or {}
    options = dict(current.get("options") or {})
    changes: dict[str, Any] = {}
    schedule = read_schedule(name, given, current.get("schedule"))
    if schedule is not None:
        changes["schedule"] = schedule
    for key in ("task", "overlap", "catch_up", "start", "end", "on_excluded"):
        if given.get(key) is not None:
            changes[key] = given[key]
    if given.get("exclude"):
        changes["exclude"] = list(given["exclude"] or ())
    if given.get("args") is not None:
        changes["args"] = read_json(name, "--args", given["args"] or "", list)
    if given.get("kwargs") is not None:
        changes["kwargs"] = read_json(name, "--kwargs", given["kwargs"] or "", dict)
    if given.get("queue") is not None:
        options["queue"] = given["queue"]
    if given.get("expires") is not None:
        options["expires"] = number(name, "--expires", given["expires"] or "")
    if given.get("priority") is not None:
        options["priority"] = whole(name, "--priority", given["priority"] or "", 0)
    if options != dict(current.get("options") or {}):
        changes["options"] = options
    if given.get("catch_up_window") is not None:
        changes["catch_up_window"] = number(
            name, "--catch-up-window", given["catch_up_window"] or ""
        )
    if given.get("max_runs") is not None:
        changes["max_runs"] = whole(name, "--max-runs", given["max_runs"] or "", 1)
    if given.get("max_lateness") is not None:
        changes["max_lateness"] = number(name, "--max-lateness", given["max_lateness"] or "")
    for key in ("alert_after_failures", "pause_after_failures"):
        if given.get(key) is not None:
            option = "--" + key.replace("_", "-")
            changes[key] = whole(name, option, given[key] or "", 1)
    workers = given.get("workers")
    if workers is not None:
        nodes = [node.strip() for node in workers.split(",")]
        if workers != "*" and not all(nodes):
            raise bad(name, "--workers", f"give '*' or node names apart by commas, not {workers!r}")
        changes["workers"] = "*" if workers == "*" else nodes
    return changes
