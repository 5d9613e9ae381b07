"""``hashbeat schedule``: every beat entry, what it resolves to, when it runs next, and what the
store says it last enqueued; an entry fanned out to workers (docs/design.md §11) as its
sub-entries."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import timedelta, tzinfo
from typing import TYPE_CHECKING, cast

import click
from celery.schedules import crontab, schedule, solar

from celery_hashbeat.cli.loading import (
    Built,
    app_option,
    app_settings,
    beat_schedule,
    build_entries,
    connected,
    require_app,
)
from celery_hashbeat.cli.output import (
    SetupError,
    StoreFailure,
    duration,
    echo_json,
    json_option,
    relative,
    table,
)
from celery_hashbeat.cli.terms import crontab_text
from celery_hashbeat.control.calendars import fates
from celery_hashbeat.control.words import stamp
from celery_hashbeat.entries.building import calendar_keys
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.entries.oneshot import once_state
from celery_hashbeat.expr.slots import CalendarSlots, IntervalSlots
from celery_hashbeat.schedules import at, hashcron, hashinterval
from celery_hashbeat.store.values import Fence, Roster

if TYPE_CHECKING:
    from celery import Celery


@dataclass
class Row:
    """One entry as the table and the JSON show it."""

    name: str
    task: str = "-"
    kind: str = "-"
    expression: str = "-"
    resolved: str = "-"
    key: str = "-"
    zone: str = "-"
    next_ms: int | None = None
    last_ms: int | None = None
    error: str | None = None
    #: The overlap mode (docs/design.md §12): "allow", "skip", "buffer_one" or "replace".
    overlap: str = "-"
    #: For a sub-entry: the entry fanned out to workers, and the worker node of this copy.
    parent: str | None = None
    worker: str | None = None
    #: For a fanned-out entry with no sub-entry now: why, and what to do.
    idle: str | None = None
    #: Whether the balancer chose its hash terms (docs/design.md §16).
    balanced: bool = False
    #: Why no next run is shown: the leader sends it none now ("paused", "max_runs 3 used
    #: up"), or an interval's slots count from the leader's anchor, which was not read.
    silent: str | None = None
    #: The days its calendar excludes, and what a slot on one does (docs/design.md §20), and
    #: how many slots before its next run the calendar leaves out, and moves.
    excluding: str | None = None
    left_out: int = 0
    moved: int = 0
    #: A one-shot's state (docs/design.md §21): done, or when it fires.
    one_shot: str | None = None


def inner_source(entry: Entry) -> object:
    """An entry's slot source under its calendar, if it has one."""
    source = entry.source
    return source.inner if isinstance(source, CalendarSlots) else source


def describe(entry: Entry, app: Celery) -> Row:
    """What kind of schedule an entry has, as written and as resolved."""
    given, row = entry.schedule, Row(entry.name, entry.task, overlap=entry.overlap)
    if isinstance(given, int | float | timedelta):
        given = schedule(given, entry.relative, app=app)
    if isinstance(given, hashcron):
        expr = given.compile(entry.name, app.timezone)
        row.kind, row.expression, row.resolved = "hashcron", given.expr, str(expr)
        row.key, row.zone = str(expr.key), str(expr.tz)
        row.balanced = given.offsets is not None
    elif isinstance(given, at):
        row.kind, row.expression = "at", given.when.isoformat()
    elif isinstance(given, hashinterval) and isinstance(inner_source(entry), IntervalSlots):
        every = duration(given.every.total_seconds())
        row.kind, row.expression = "hashinterval", f"every {every}"
        offset = cast(IntervalSlots, inner_source(entry)).offset
        row.resolved = f"every {every}, {offset / 1000:.3f}s into each period"
        row.key = str(given.key if given.key is not None else entry.name)
    elif isinstance(given, crontab):
        row.kind, row.zone = "crontab", str(given.tz or app.timezone)
        row.expression = row.resolved = crontab_text(given)
    elif isinstance(given, solar):
        row.kind, row.expression = "solar", f"{given.event} at {given.lat}, {given.lon}"
    elif isinstance(given, schedule):
        row.kind, row.expression = "interval", f"every {duration(given.seconds)}"
        if given.relative:
            row.expression += " (relative)"
    else:
        row.kind, row.expression = type(given).__name__, repr(given)
    calendar = calendar_keys(entry)
    if calendar:
        row.excluding = f"{'; '.join(calendar['exclude'])} ({calendar['on_excluded']})"
    return row


@click.command(name="schedule")
@app_option
@click.option(
    "--no-store",
    is_flag=True,
    help="Do not read the store: no stored entries, pauses or last enqueued slots, and no next "
    "run for an interval, whose slots count from the anchor the leader keeps there.",
)
@json_option
def schedule_command(app_name: str | None, no_store: bool, as_json: bool) -> None:
    """List every beat entry: its expression resolved, next run, last enqueued slot.

    Entries come from the app's beat_schedule (with the periodic tasks its modules add), each
    built as celery_hashbeat.Scheduler builds it, so an entry that would not run shows its error
    here. Next run follows the scheduler's catch-up policy: a slot missed since the last one
    enqueued shows as due now; an entry paused by an operator, or whose max_runs are used up,
    has none, and says so. Times are in the app's timezone.

    An entry with "workers" is listed as its copies, one per worker, each named and keyed
    ENTRY@NODE. For "workers": "*" the workers are the leader's census in the store; before
    there is one, or with --no-store, the entry is one row saying its workers are not known yet.

    Exits 3 when an entry cannot run, 4 when the store cannot be read (the table is printed
    first, without last enqueued slots).

    \b
    Examples:
      hashbeat schedule -A proj
      celery -A proj hashbeat schedule --json
      hashbeat schedule -A proj --no-store
    """
    app = require_app(app_name)
    now = int(time.time() * 1000)
    built: Built | None = None
    fences: dict[str, Fence] = {}
    problem: StoreFailure | None = None
    if not no_store:  # even with an empty beat_schedule: the store may hold entries
        beat_schedule(app)  # the app's modules are loaded first: their errors say so
        settings = app_settings(app)
        try:
            with connected(settings.store_url, settings.key_prefix, settings.store_options) as s:
                built = build_entries(app, now, s)
                fences = s.fences([entry.name for entry in built.entries])
        except StoreFailure as exc:
            problem = exc
    if built is None:
        built = build_entries(app, now)
    roster = built.planned.roster
    unknown = "the store cannot be read" if problem else "--no-store" if no_store else None
    idle = [_idle(name, entry, built, roster, unknown, app) for name, entry in built.idle.items()]
    rows = sorted(
        [describe(entry, app) for entry in built.entries]
        + [row for row, _ in idle]
        + [Row(name, error=error) for name, error in built.errors.items()],
        key=lambda row: row.name,
    )
    by_name = {row.name: row for row in rows}
    subs = built.subs
    for entry in built.entries:
        fence = fences.get(entry.name)
        row = by_name[entry.name]
        if unknown is not None and entry.source.chained:
            # Its slots count from the anchor the leader keeps in the store: not known here.
            row.silent = f"counts from the leader's anchor ({unknown})"
        else:
            row.next_ms = built.next_slot(entry.name, fence, now)
            row.silent = built.silent(entry.name, fence)
            if row.excluding is not None and row.next_ms is not None:
                found = fates(entry, now, row.next_ms)
                row.left_out, row.moved = found.left_out_count, found.moved_count
        row.last_ms = None if fence is None or fence.anchor else fence.slot
        fence_slot = None if fence is None else fence.slot
        next_slots = [] if row.next_ms is None else [row.next_ms]
        row.one_shot = once_state(entry.source, fence_slot, next_slots, row.silent is not None)
        row.parent, row.worker = subs.get(entry.name, (None, None))
    if as_json:
        workers = None if roster is None else _roster_json(roster)
        echo_json({"now_ms": now, "workers": workers, "entries": [asdict(r) for r in rows]})
    else:
        labels = {row.name: label for row, label in idle}
        _print(rows, labels, now, app.timezone, show_last=not no_store and problem is None)
    if problem is not None:
        raise problem
    broken = [row.name for row in rows if row.error]
    if broken:
        raise SetupError(f"entries that cannot run: {', '.join(broken)}")


def _idle(
    name: str, entry: Entry, built: Built, roster: Roster | None, unknown: str | None, app: Celery
) -> tuple[Row, str]:
    """The row of a fanned-out entry that has no sub-entry now (what it runs, and why nowhere),
    and what its NEXT RUN says in the table."""
    row = describe(entry, app)  # built for a placeholder worker: its key and slots are not real
    row.name, row.key = name, "-"
    if row.kind in ("hashcron", "hashinterval"):
        row.resolved = "-"
    every = f'entry {name!r} runs on every live worker ("workers": "*")'
    if name not in built.every_worker:
        row.idle = (
            f'entry {name!r} lists no workers ("workers": []), so it runs nowhere: name the '
            "worker nodes, or remove 'workers'"
        )
        return row, "no workers listed"
    if roster is not None and not roster.nodes:
        row.idle = (
            f"{every}, and no worker answered the leader's census at "
            f"{stamp(roster.resolved_ms, app.timezone)}: check that the workers are up and use "
            "the app's broker"
        )
        return row, "no live workers"
    if unknown == "--no-store":
        row.idle = (
            f"{every}, which the leader's census of live workers in the store names: run "
            "without --no-store to list its copies"
        )
    elif unknown is not None:
        row.idle = (
            f"{every}, which the leader's census in the store names, and {unknown} (see below)"
        )
    else:
        row.idle = (
            f"{every}: waiting for the leader's census of live workers, which a beat takes "
            "within seconds of leading (hashbeat status shows whether one leads); run this "
            "again then to list its copies"
        )
    return row, "workers not known yet"


def _roster_json(roster: Roster) -> dict[str, object]:
    return {"nodes": list(roster.nodes), "resolved_ms": roster.resolved_ms}


def _print(
    rows: list[Row], labels: dict[str, str], now: int, zone: tzinfo, show_last: bool
) -> None:
    if not rows:
        store = "holds none" if show_last else "was not read"
        click.echo(f"No entries: the app's beat_schedule is empty, and the store {store}.")
        return

    def when(ms: int | None, missing: str, upcoming: bool) -> str:
        if ms is None:
            return missing
        due = upcoming and ms <= now
        return f"{stamp(ms, zone)} ({'due now, catching up' if due else relative(ms, now)})"

    headers = ["NAME", "TASK", "KIND", "EXPRESSION", "RESOLVED", "KEY", "ZONE", "NEXT RUN"]
    if show_last:
        headers.append("LAST ENQUEUED")
    lines = []
    for row in rows:
        if row.error is None:
            kind = f"{row.kind}, balanced" if row.balanced else row.kind
            line = [row.name, row.task, kind, row.expression, row.resolved, row.key, row.zone]
            if row.idle is not None:
                line.append(labels[row.name])
                line.extend(["-"] if show_last else [])
            else:
                done = row.one_shot.split(":")[0] if row.next_ms is None and row.one_shot else None
                line.append(done or when(row.next_ms, row.silent or "-", upcoming=True))
                if show_last:
                    line.append(when(row.last_ms, "never", upcoming=False))
            lines.append(line)
    if lines:
        click.echo(table(headers, lines))
    for row in rows:
        if row.idle is not None:
            click.echo(f"no copies: {row.idle}")
    for row in rows:
        if row.excluding is not None:
            click.echo(f"{row.name}: excluding {row.excluding}")
        if row.left_out or row.moved:
            click.echo(
                f"{row.name}: before its next run, the calendar leaves out {row.left_out} "
                f"slot(s) and moves {row.moved}"
            )
        if row.next_ms is None and row.one_shot is not None:
            click.echo(f"{row.name}: {row.one_shot}")
    for row in rows:
        if row.error is not None:
            click.echo(f"cannot run: {row.error}")
