"""``hashbeat show NAME``: what happened to an entry's recent slots (DESIGN.md §14), end to end:
sent (by which beat, how late), skipped and why, missed by a catch-up, and, from the workers,
started, succeeded or failed (how long it ran)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import click

from ..history import HISTORY_CAP, MISSED, SENT, SKIPPED, Record, decode
from ..settings import DEFAULT_KEY_PREFIX
from ..store import Store
from .loading import app_option, build_entries, chosen_store, connected, find_celery_app
from .output import Findings, echo_json, json_option, relative, stamp, stamp_iso, table

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
    """``entry``'s readable records, newest first (unreadable ones are left out)."""
    return [record for record in map(decode, store.history(entry, limit)) if record is not None]


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
    """Show what happened to entry NAME's recent slots, newest first.

    Each line is one outcome: sent (by which beat, how late after its slot), skipped (and why:
    overlap means its previous run was still queued or running), missed (left out by the
    catch-up policy after an outage or a leader change), and, from the workers, started,
    succeeded or failed (with how long the task ran). With the app, the entry's next slot too.

    \b
    Examples:
      hashbeat show refresh-prices -A proj
      hashbeat show refresh-prices --store redis://redis:6379/0 --json
    """
    app = find_celery_app(app_name)
    store_url, prefix, options = chosen_store(app, store_url, prefix)
    now = int(time.time() * 1000)
    with connected(store_url, prefix, options) as store:
        history = records(store, name, limit)
        next_slot = None
        if app is not None:
            entry = next((e for e in build_entries(app, now).entries if e.name == name), None)
            if entry is not None:
                fence = store.fences([name]).get(name)
                entry.start(None if fence is None or fence.anchor else fence.slot, now)
                next_slot = entry.slot
    if as_json:
        echo_json(
            {
                "entry": name,
                "next_slot": None if next_slot is None else stamp(next_slot),
                "history": [record_json(record) for record in history],
            }
        )
        return
    if next_slot is not None:
        click.echo(f"next slot  {stamp(next_slot)} ({relative(next_slot, now)})")
    if not history:
        raise Findings(
            f"entry {name!r} has no history in {store_url} (prefix {prefix!r}): check the name "
            "(hashbeat schedule lists them) and the prefix"
        )
    rows = [
        [
            stamp(record.at),
            record.outcome,
            "" if record.slot is None else stamp(record.slot),
            record.by,
            record.task_id,
            detail(record),
        ]
        for record in history
    ]
    click.echo(table(["WHEN", "OUTCOME", "SLOT", "BY", "TASK ID", "DETAIL"], rows))
