"""``hashbeat show NAME``: an entry (docs/design.md §13: source, definition, pause, next slots) and
what happened to its recent slots (docs/design.md §14), end to end: sent (by which beat, how late),
skipped and why, missed by a catch-up, and, from the workers, started, succeeded or failed (how
long it ran). The words for an entry are shared with ``hashbeat entries``."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from celery_hashbeat.cli.loading import (
    app_option,
    build_entries,
    chosen_store,
    connected,
    find_celery_app,
)
from celery_hashbeat.cli.output import (
    SetupError,
    echo_json,
    json_option,
    relative,
    stamp_iso,
    table,
)
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.refusals import UnknownEntryError
from celery_hashbeat.control.views import EntryView
from celery_hashbeat.control.words import schedule_text, stamp
from celery_hashbeat.observe.history import (
    HISTORY_CAP,
    MISSED,
    SENT,
    SKIPPED,
    Record,
    newest_first,
)
from celery_hashbeat.settings import DEFAULT_KEY_PREFIX
from celery_hashbeat.store import Store, mask_url

if TYPE_CHECKING:
    from celery import Celery

#: The window of the counts ``hashbeat status`` shows per entry (ms).
HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Summary:
    """One entry's history in a line: its last outcome and the last hour's counts."""

    last: Record | None
    sent: int
    skipped: int
    missed: int

    def json(self) -> dict[str, object]:
        return {
            "last_outcome": None if self.last is None else record_json(self.last),
            "last_hour": {"sent": self.sent, "skipped": self.skipped, "missed": self.missed},
        }


def records(store: Store, entry: str, limit: int = HISTORY_CAP) -> list[Record]:
    """``entry``'s ``limit`` newest readable records, newest first by when each happened (all
    the store keeps are read, since it keeps them in the order they arrived)."""
    return newest_first(store.history(entry, HISTORY_CAP))[:limit]


def summarize(history: Iterable[Record], now: int) -> Summary:
    """The newest record and the counts of the hour before ``now`` (a missed record counts the
    slots it stands for)."""
    history = list(history)
    counts: Counter[str] = Counter()
    for record in history:
        if record.at >= now - HOUR_MS:
            counts[record.outcome] += (record.count or 1) if record.outcome == MISSED else 1
    return Summary(history[0] if history else None, counts[SENT], counts[SKIPPED], counts[MISSED])


def record_json(record: Record) -> dict[str, object]:
    """A record for --json, with its instants in ISO 8601."""
    data: dict[str, object] = {
        key: value
        for key, value in vars(record).items()
        if value is not None and value != "" and key != "at"
    }
    data["at"] = stamp_iso(record.at)
    if record.slot is not None:
        data["slot"] = stamp_iso(record.slot)
    return data


def detail(record: Record) -> str:
    """What else a record says, in words."""
    parts = []
    if record.reason:
        parts.append(record.reason)
    if record.count is not None:
        parts.append(f"{record.count} slot{'' if record.count == 1 else 's'}")
    if record.lateness_ms is not None:
        parts.append(f"{record.lateness_ms} ms late")
    if record.run_ms is not None:
        parts.append(f"ran {record.run_ms} ms")
    return ", ".join(parts)


def paused_text(view: EntryView, now: int) -> str:
    """``since ... (2m ago) by who: why`` for a paused entry, "" for one that is not."""
    if view.pause is None or not view.pause.paused:
        return ""
    since = f"since {stamp(view.pause.at)} ({relative(view.pause.at, now)})"
    if view.pause.who:
        since += f" by {view.pause.who}"
    return f"{since}: {view.pause.reason}" if view.pause.reason else since


def paused_word(view: EntryView) -> str:
    """``yes (why)`` or ``no``, for a table column."""
    if not view.paused or view.pause is None:
        return "no"
    return f"yes ({view.pause.reason})" if view.pause.reason else "yes"


def entry_json(view: EntryView) -> dict[str, object]:
    """What ScheduleAdmin knows of an entry, for --json: instants in ISO 8601."""
    pause = view.pause
    return {
        "source": view.source,
        "definition": view.definition,
        "paused": None
        if pause is None or not pause.paused
        else {"reason": pause.reason, "since": stamp_iso(pause.at), "by": pause.who},
        "next_slots": [stamp_iso(slot) for slot in view.next_slots],
        **({} if view.state is None else {"one_shot": view.state}),
        **calendar_json(view),
    }


def calendar_json(view: EntryView) -> dict[str, object]:
    """What the entry's calendar did to the slots shown, for --json (nothing without one)."""
    found: dict[str, object] = {}
    if view.moved_from:
        found["moved_from"] = {
            stamp_iso(slot): [stamp_iso(origin) for origin in origins]
            for slot, origins in view.moved_from.items()
        }
    if view.fates.left_out_count:
        found["left_out"] = [stamp_iso(slot) for slot in view.fates.left_out]
        found["left_out_count"] = view.fates.left_out_count
    return found


def view_json(view: EntryView) -> dict[str, object]:
    """An entry as ``hashbeat entries --json`` lists it."""
    last = record_json(view.recent[0]) if view.recent else None
    return {"name": view.name, **entry_json(view), "last_outcome": last}


def describe_view(view: EntryView, now: int) -> str:
    """An entry's source, definition, pause and next slots, one field a line."""
    definition = dict(view.definition)
    lines = [("entry", f"{view.name}  ({view.source})")]
    if "unreadable" in definition:
        lines.append(("unreadable", str(definition.pop("unreadable")).splitlines()[0]))
    for key in ("task", "schedule", *sorted(set(definition) - {"task", "schedule"})):
        if key in definition:
            value = definition[key]
            if key == "schedule":
                text = schedule_text(value)
            else:
                text = value if isinstance(value, str) else json.dumps(value)
            lines.append((key, text))
    lines.append(("paused", paused_text(view, now) or "no"))
    if view.state is not None:
        lines.append(("one-shot", view.state))
    slots = [
        f"{stamp(slot)} ({relative(slot, now)}){moved(view, slot)}" for slot in view.next_slots
    ]
    none = "none while paused" if view.paused else "-"
    lines += [("next slots" if i == 0 else "", slot) for i, slot in enumerate(slots or [none])]
    fates = view.fates
    if fates.left_out_count:
        more = fates.left_out_count - len(fates.left_out)
        left = [stamp(slot) for slot in fates.left_out] + ([f"and {more} more"] if more else [])
        lines += [("left out" if i == 0 else "", text) for i, text in enumerate(left)]
    width = max(len(key) for key, _ in lines) + 2
    return "\n".join(f"{key:<{width}}{text}".rstrip() for key, text in lines) + "\n"


def moved(view: EntryView, slot: int) -> str:
    """What the entry's calendar moved onto ``slot``, in words ("" for nothing)."""
    origins = view.moved_from.get(slot)
    return f", moved from {', '.join(map(stamp, origins))}" if origins else ""


@click.command()
@click.argument("name")
@app_option
@click.option("--store", "store_url", metavar="URL", help="The store, when there is no app.")
@click.option("--prefix", help=f"Key prefix; default the app's, else {DEFAULT_KEY_PREFIX}.")
@click.option(
    "--limit",
    default=20,
    show_default=True,
    type=click.IntRange(1, HISTORY_CAP),
    help=f"How many of the newest records to show (the store keeps {HISTORY_CAP}).",
)
@json_option
def show(
    name: str,
    app_name: str | None,
    store_url: str | None,
    prefix: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Show entry NAME and what happened to its recent slots, newest first.

    With the app: where the entry comes from (beat_schedule, or the store), its definition,
    whether it is paused (why, since when) and its next 10 slots. Then each line is one
    outcome: sent (by which beat, how late after its slot), skipped (and why: overlap means its
    previous run was still queued or running), missed (left out by the catch-up policy after an
    outage or a leader change), trigger (a run asked for with hashbeat trigger), and, from the
    workers, started, succeeded or failed (with how long the task ran).

    \b
    Examples:
      hashbeat show refresh-prices -A proj
      hashbeat show refresh-prices --store redis://redis:6379/0 --json
    """
    app = find_celery_app(app_name)
    store_url, prefix, options = chosen_store(app, store_url, prefix)
    now = int(time.time() * 1000)
    view: EntryView | None = None
    with connected(store_url, prefix, options) as store:
        history = records(store, name, limit)
        next_slot = None
        if app is not None:
            try:
                view = ScheduleAdmin(app, store).get(name)
                next_slot = view.next_slots[0] if view.next_slots else None
            except UnknownEntryError:  # a worker's copy, or an entry that is gone
                next_slot = planned_slot(app, store, name, now)
    if as_json:
        echo_json(
            {
                "entry": name,
                "next_slot": None if next_slot is None else stamp(next_slot),
                **({} if view is None else entry_json(view)),
                "history": [record_json(record) for record in history],
            }
        )
        return
    if view is not None:
        click.echo(describe_view(view, now))
    elif next_slot is not None:
        click.echo(f"next slot  {stamp(next_slot)} ({relative(next_slot, now)})")
    if not history:
        if view is not None:
            click.echo("history    none yet")
            return
        raise SetupError(
            f"no entry {name!r}, and no history of one, in {mask_url(store_url)} (prefix "
            f"{prefix!r}): check the name (hashbeat entries lists them) and the prefix"
        )
    gone = app is not None and view is None and next_slot is None
    if gone:
        click.echo(f"entry      {name}  (gone: in neither beat_schedule nor the store)")
    rows = [
        [
            stamp(record.at, millis=True),
            record.outcome,
            "" if record.slot is None else stamp(record.slot, millis=True),
            record.by,
            record.task_id,
            detail(record),
        ]
        for record in history
    ]
    click.echo(table(["WHEN", "OUTCOME", "SLOT", "BY", "TASK ID", "DETAIL"], rows))
    if gone:
        raise SetupError(f"no entry {name!r} now: above is the history it left (exit code 3)")


def planned_slot(app: Celery, store: Store, name: str, now: int) -> int | None:
    """The next slot of an entry the leader runs (a worker's copy of a fanned-out entry too),
    as it plans it from its fence; None for one it does not run."""
    return build_entries(app, now, store).next_slot(name, store.fences([name]).get(name), now)
