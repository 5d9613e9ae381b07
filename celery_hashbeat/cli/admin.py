"""``hashbeat add/update/remove/pause/resume/trigger``: the schedule changed while the beats run
(docs/design.md §13), through ScheduleAdmin, so that the CLI checks exactly what Python callers get
checked. Options arrive as text and are read here, so that every refusal is one line with the
exit code AdminError gives (2: bad input, 3: no such entry), and nothing stored changes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from celery_hashbeat.cli.loading import (
    app_option,
    beat_schedule,
    chosen_store,
    connected,
    require_app,
)
from celery_hashbeat.cli.output import (
    Failure,
    echo_json,
    json_option,
    relative,
    stamp,
    stamp_iso,
)
from celery_hashbeat.control.admin import AdminError, ScheduleAdmin
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


@contextmanager
def opened_admin(app_name: str | None) -> Iterator[ScheduleAdmin]:
    """ScheduleAdmin on the app's store (checked to answer); a refusal inside becomes one line
    with its exit code."""
    app = require_app(app_name)
    beat_schedule(app)  # imports the task modules: their tasks are then known to be registered
    url, prefix, options = chosen_store(app, None, None)
    with connected(url, prefix, options) as store:
        try:
            yield ScheduleAdmin(app, store)
        except AdminError as exc:
            raise Refused(str(exc), exc.exit_code) from None


#: The options that define an entry, as ``add`` takes them and ``update`` changes them.
DEFINITION_OPTIONS = (
    click.option("--task", metavar="TASK", help="The task's registered name."),
    click.option("--cron", metavar="EXPR", help='A hash-cron expression: hashcron("EXPR").'),
    click.option("--tz", metavar="ZONE", help="The --cron expression's IANA time zone."),
    click.option("--every", metavar="SECONDS", help="A plain interval, as a beat_schedule number."),
    click.option("--interval", metavar="SECONDS", help="hashinterval(SECONDS): a hashed offset."),
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
)


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
    chosen = [key for key in ("cron", "every", "interval") if given.get(key) is not None]
    if len(chosen) > 1:
        raise bad(name, "--" + "/--".join(chosen), "give only one of --cron, --every, --interval")
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
    for key in ("task", "overlap", "catch_up", "start", "end"):
        if given.get(key) is not None:
            changes[key] = given[key]
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
    workers = given.get("workers")
    if workers is not None:
        nodes = [node.strip() for node in workers.split(",")]
        if workers != "*" and not all(nodes):
            raise bad(name, "--workers", f"give '*' or node names apart by commas, not {workers!r}")
        changes["workers"] = "*" if workers == "*" else nodes
    return changes


def next_slot_line(admin: ScheduleAdmin, name: str) -> str:
    slots = admin.get(name).next_slots
    if not slots:
        return "it has no next slot"
    now = int(time.time() * 1000)
    return f"next slot {stamp(slots[0])} ({relative(slots[0], now)})"


def entry_json(admin: ScheduleAdmin, name: str, done: str) -> dict[str, Any]:
    """What ``--json`` prints after a change: what was done, and the entry as it is now."""
    view = admin.get(name)
    return {
        "done": done,
        "entry": name,
        "revision": view.revision,
        "definition": view.definition,
        "next_slot": stamp_iso(view.next_slots[0]) if view.next_slots else None,
    }


@click.command()
@click.argument("name")
@app_option
@definition_options
@json_option
def add(
    name: str,
    app_name: str | None,
    allow_unregistered_task: bool,
    as_json: bool,
    **given: str | None,
) -> None:
    """Add entry NAME to the store, beside beat_schedule; the leader picks it up within a
    second and sends it at its first slot after now, never at once.

    Give --task and one of --cron (with --tz), --every or --interval.

    \b
    Examples:
      hashbeat add report-42 -A proj --task shop.report --cron "H 6 * * *" --tz Europe/Riga \\
          --args '[42]' --queue reports --overlap skip
      hashbeat add poll -A proj --task feeds.poll --interval 300 --max-runs 10
    """
    if not given.get("task"):
        raise bad(name, "--task", "give the task to send")
    if all(given.get(key) is None for key in ("cron", "every", "interval")):
        raise bad(name, "--cron, --every or --interval", "give the entry's schedule")
    changes = read_changes(name, given)
    task, schedule = changes.pop("task"), changes.pop("schedule")
    with opened_admin(app_name) as admin:
        admin.add(name, task, schedule, allow_unregistered_task=allow_unregistered_task, **changes)
        if as_json:
            echo_json(entry_json(admin, name, "added"))
        else:
            click.echo(f"added {name!r}: {next_slot_line(admin, name)}")


@click.command()
@click.argument("name")
@app_option
@definition_options
@click.option(
    "--unset",
    "unset",
    multiple=True,
    metavar="FIELD",
    help=f"Remove an optional field: {', '.join(UNSETTABLE)} (repeatable).",
)
def update(
    name: str,
    app_name: str | None,
    allow_unregistered_task: bool,
    unset: tuple[str, ...],
    **given: str | None,
) -> None:
    """Change store entry NAME: only the options given change. It applies from the entry's
    next slot after now; nothing of the new schedule is caught up from before it.

    \b
    Examples:
      hashbeat update report-42 -A proj --cron "H 7 * * *"
      hashbeat update report-42 -A proj --unset end --max-runs 5
    """
    unknown = sorted(set(unset) - set(UNSETTABLE))
    if unknown:
        raise bad(
            name, "--unset", f"{unknown[0]!r} cannot be removed; give {', '.join(UNSETTABLE)}"
        )
    if not unset and all(value is None for value in given.values()):
        raise bad(name, "update", "nothing to change: give an option (hashbeat update -h)")
    with opened_admin(app_name) as admin:
        view = admin.get(name)
        current = view.definition
        changes = read_changes(name, given, current)
        for field in unset:
            if field in OPTION_FIELDS:
                options = dict(changes.get("options", current.get("options")) or {})
                options.pop(field, None)
                changes["options"] = options
            else:
                changes[field] = None
        # Only if the entry is still the revision the changes were read from (exit code 5).
        admin.update(
            name,
            allow_unregistered_task=allow_unregistered_task,
            revision=view.revision,
            **changes,
        )
        click.echo(f"updated {name!r}: {next_slot_line(admin, name)}")


@click.command()
@click.argument("name")
@app_option
def remove(name: str, app_name: str | None) -> None:
    """Remove store entry NAME (and its pause); its slots stop, its history stays. Entries of
    beat_schedule are removed from the configuration instead.

    \b
    Example:
      hashbeat remove report-42 -A proj
    """
    with opened_admin(app_name) as admin:
        admin.remove(name)
    click.echo(f"removed {name!r}")


@click.command()
@click.argument("name")
@app_option
@click.option("--reason", default="", help="Why, shown by hashbeat entries and show.")
def pause(name: str, app_name: str | None, reason: str) -> None:
    """Pause entry NAME, of the store or of beat_schedule: none of its slots is sent until it
    is resumed (a trigger still is).

    \b
    Example:
      hashbeat pause nightly-report -A proj --reason "supplier outage"
    """
    with opened_admin(app_name) as admin:
        admin.pause(name, reason)
    click.echo(f"paused {name!r}" + (f": {reason}" if reason else ""))


@click.command()
@click.argument("name")
@app_option
@click.option(
    "--catch-up",
    is_flag=True,
    help="Send what the pause held back, as the entry's catch-up policy says.",
)
def resume(name: str, app_name: str | None, catch_up: bool) -> None:
    """Resume entry NAME from now: the slots the pause held back are not sent, unless
    --catch-up asks for them (with catch_up="all", a long pause makes a burst).

    \b
    Example:
      hashbeat resume nightly-report -A proj
    """
    with opened_admin(app_name) as admin:
        resumed = admin.resume(name, catch_up=catch_up)
        line = next_slot_line(admin, name)
    if not resumed:
        click.echo(f"{name!r} is not paused; nothing changed: {line}")
        return
    how = "catching up as its policy says" if catch_up else "from now"
    click.echo(f"resumed {name!r} {how}: {line}")


@click.command()
@click.argument("name")
@app_option
@click.option(
    "--force",
    is_flag=True,
    help="Run it even while a run of it is in progress and its overlap is skip (recorded).",
)
@json_option
def trigger(name: str, app_name: str | None, force: bool, as_json: bool) -> None:
    """Ask for one run of entry NAME now; print its task id, then what becomes of it. The
    leader sends it within a second (or, with no leader, when one leads), once, with a task id
    of its own and the header hashbeat_trigger; the entry's slots do not move.

    A trigger follows the entry's overlap: with skip, while a run of it is in progress, it is
    refused (exit code 6) unless --force; with buffer_one it waits for that run to end; with
    replace the run is revoked.

    \b
    Examples:
      hashbeat trigger nightly-report -A proj
      hashbeat trigger nightly-report -A proj --force --json
    """
    with opened_admin(app_name) as admin:
        triggered = admin.trigger(name, force=force)
    if as_json:
        echo_json(triggered.as_json())
    else:
        click.echo(str(triggered))
        click.echo(triggered.note)
