"""``hashbeat add/update/remove/pause/resume/trigger``: the schedule changed while the beats run
(docs/design.md §13), through ScheduleAdmin, so that the CLI checks exactly what Python callers get
checked. Options arrive as text and are read here, so that every refusal is one line with the
exit code AdminError gives (2: bad input, 3: no such entry), and nothing stored changes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from celery_hashbeat.cli.changes import (
    REASON,
    UNSETTABLE,
    Refused,
    bad,
    definition_options,
    read_changes,
)
from celery_hashbeat.cli.loading import (
    app_option,
    beat_schedule,
    chosen_store,
    connected,
    require_app,
)
from celery_hashbeat.cli.output import echo_json, json_option, relative, stamp_iso
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.fields import OPTION_FIELDS
from celery_hashbeat.control.refusals import AdminError
from celery_hashbeat.control.words import stamp


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

    Give --task and one of --cron (with --tz), --every, --interval or --at (a one-shot).

    \b
    Examples:
      hashbeat add report-42 -A proj --task shop.report --cron "H 6 * * *" --tz Europe/Riga \\
          --args '[42]' --queue reports --overlap skip --exclude sat,sun --exclude holidays:LV
      hashbeat add poll -A proj --task feeds.poll --interval 300 --max-runs 10
      hashbeat add launch -A proj --task shop.launch --at 2026-12-01T09:00:00+01:00
    """
    if not given.get("task"):
        raise bad(name, "--task", "give the task to send")
    if all(given.get(key) is None for key in ("cron", "every", "interval", "at")):
        raise bad(name, "--cron, --every, --interval or --at", "give the entry's schedule")
    reason = given.pop("reason", None) or ""
    changes = read_changes(name, given)
    task, schedule = changes.pop("task"), changes.pop("schedule")
    with opened_admin(app_name) as admin:
        admin.add(
            name,
            task,
            schedule,
            allow_unregistered_task=allow_unregistered_task,
            reason=reason,
            **changes,
        )
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
    reason = given.pop("reason", None) or ""
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
            reason=reason,
            **changes,
        )
        click.echo(f"updated {name!r}: {next_slot_line(admin, name)}")


@click.command()
@click.argument("name")
@app_option
@REASON
def remove(name: str, app_name: str | None, reason: str) -> None:
    """Remove store entry NAME (and its pause); its slots stop, its history stays. Entries of
    beat_schedule are removed from the configuration instead.

    \b
    Example:
      hashbeat remove report-42 -A proj
    """
    with opened_admin(app_name) as admin:
        admin.remove(name, reason=reason)
    click.echo(f"removed {name!r}")


@click.command()
@click.argument("name")
@app_option
@click.option("--reason", default="", help="Why, shown by entries and show, kept in the audit.")
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
@REASON
def resume(name: str, app_name: str | None, catch_up: bool, reason: str) -> None:
    """Resume entry NAME from now: the slots the pause held back are not sent, unless
    --catch-up asks for them (with catch_up="all", a long pause makes a burst).

    \b
    Example:
      hashbeat resume nightly-report -A proj
    """
    with opened_admin(app_name) as admin:
        resumed = admin.resume(name, catch_up=catch_up, reason=reason)
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
@REASON
@json_option
def trigger(name: str, app_name: str | None, force: bool, reason: str, as_json: bool) -> None:
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
        triggered = admin.trigger(name, force=force, reason=reason)
    if as_json:
        echo_json(triggered.as_json())
    else:
        click.echo(str(triggered))
        click.echo(triggered.note)
