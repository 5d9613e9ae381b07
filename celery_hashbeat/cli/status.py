"""``hashbeat status``: who leads, which beats are alive, what was enqueued last, the workers
the leader found alive, the runs now queued or running (docs/design.md §11-12) and the entries
paused by an operator (§13); ``--check`` turns it into a health probe."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import click
from celery import Celery

from celery_hashbeat.cli.loading import (
    app_option,
    build_entries,
    chosen_store,
    connected,
    find_celery_app,
)
from celery_hashbeat.cli.output import (
    Findings,
    duration,
    echo_json,
    json_option,
    relative,
    stamp_iso,
    table,
)
from celery_hashbeat.cli.show import Summary, records, summarize
from celery_hashbeat.control.pause_and_trigger import Pause, decode_pause
from celery_hashbeat.control.stored_text import DefinitionError
from celery_hashbeat.control.words import stamp
from celery_hashbeat.settings import DEFAULT_KEY_PREFIX
from celery_hashbeat.store import BeatInfo, LeaseInfo, Store
from celery_hashbeat.store.values import Roster


@click.command()
@app_option
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    help="The store (hashbeat_store_url), when there is no app or to look at another one.",
)
@click.option(
    "--prefix",
    help=f"Key prefix (hashbeat_key_prefix); default the app's, else {DEFAULT_KEY_PREFIX}.",
)
@click.option("--check", is_flag=True, help="Exit 1 unless a beat holds the lease.")
@click.option(
    "--limit",
    default=10,
    show_default=True,
    type=click.IntRange(0),
    help="How many of the last enqueued slots and of the entries to list (--json lists all).",
)
@json_option
def status(
    app_name: str | None,
    store_url: str | None,
    prefix: str | None,
    check: bool,
    limit: int,
    as_json: bool,
) -> None:
    """Show the store, the leader and its lease, live beats, the last slots enqueued, the live
    workers, the runs now queued or running, and per entry its next slot (with the app), its
    last outcome and the last hour's sent, skipped and missed slots (hashbeat show NAME tells
    the whole history).

    The live workers are the leader's last census of them, which fans out the entries with
    "workers": "*"; they are shown once a leader took one. The runs are the run leases of
    entries with an "overlap" other than "allow": entry and task id.

    The store is the app's (hashbeat_store_url and friends), or the one given with --store.
    With --check it is a health probe: exit 0 when a beat holds the lease, 1 when none does
    (nothing is being enqueued), 4 when the store cannot be reached.

    \b
    Examples:
      hashbeat status -A proj
      hashbeat status --store redis://redis:6379/0 --check
      celery -A proj hashbeat status --json
    """
    app = find_celery_app(app_name)
    store_url, prefix, options = chosen_store(app, store_url, prefix)
    with connected(store_url, prefix, options) as store:
        where = store.url
        lease = store.leader()
        beats = store.beats()
        slots = sorted(store.last_slots().items(), key=lambda item: (-item[1], item[0]))
        roster = store.roster()
        running = dict(sorted(store.running().items()))
        controls = store.changes(0)
        paused = paused_entries(controls.records)
        now = int(time.time() * 1000)
        listed = None if as_json else limit
        entries = entry_lines(store, app, now, [name for name, _ in slots], listed)
    if as_json:
        echo_json(
            {
                "store": where,
                "prefix": prefix,
                "leader": None
                if lease is None
                else {"token": lease.token, "lease_left_ms": lease.ttl_left_ms},
                "beats": [
                    {
                        "token": b.token,
                        "role": role(b, lease),
                        "last_seen": stamp_iso(b.last_seen_ms),
                        "seen_ms_ago": max(0, now - b.last_seen_ms),
                    }
                    for b in beats
                ],
                "last_slots": dict(slots),
                "workers": None if roster is None else roster_json(roster, now),
                "running": running,
                "paused": {
                    name: {"reason": pause.reason, "since": stamp_iso(pause.at)}
                    for name, pause in paused.items()
                },
                "triggers_waiting": controls.triggers,
                "entry_count": entries.total,
                "entries": {
                    name: {
                        "next_slot": None if line.next_slot is None else stamp_iso(line.next_slot),
                        "silent": line.silent,
                        **line.summary.json(),
                    }
                    for name, line in entries.lines.items()
                },
                "not_listed": entries.left_out,
            }
        )
    else:
        click.echo(f"store     {where}  (prefix {prefix!r})")
        if lease is None:
            click.echo("leader    none: no beat holds the lease, nothing is being enqueued")
        else:
            left = duration(lease.ttl_left_ms / 1000)
            click.echo(f"leader    {lease.token}  (lease {left} left)")
        click.echo(f"beats     {len(beats)} seen recently")
        if beats:
            rows = [[b.token, role(b, lease), relative(b.last_seen_ms, now)] for b in beats]
            click.echo(table(["TOKEN", "ROLE", "LAST SEEN"], rows, indent="  "))
        click.echo(f"enqueued  last slots of {len(slots)} entr{'y' if len(slots) == 1 else 'ies'}")
        if slots and limit:
            rows = [
                [name, stamp(slot, millis=True), relative(slot, now)]
                for name, slot in slots[:limit]
            ]
            click.echo(table(["ENTRY", "LAST SLOT", ""], rows, indent="  "))
            if len(slots) > limit:
                click.echo(f"  ... and {len(slots) - limit} more (--limit, or --json)")
        if roster is not None:
            echo_roster(roster, now)
        if running:
            click.echo(
                f"running   {len(running)} run{'' if len(running) == 1 else 's'} queued or running"
            )
            rows = [[entry, task_id] for entry, task_id in running.items()]
            click.echo(table(["ENTRY", "TASK ID"], rows, indent="  "))
        if paused:
            click.echo(f"paused    {len(paused)} entr{'y' if len(paused) == 1 else 'ies'}")
            rows = [
                [name, pause.reason or "-", relative(pause.at, now)]
                for name, pause in paused.items()
            ]
            click.echo(table(["ENTRY", "REASON", "SINCE"], rows, indent="  "))
        if controls.triggers:
            click.echo(f"triggers  {controls.triggers} waiting for a leader to send them")
        if entries.lines or entries.more or entries.left_out:
            echo_entries(entries, now, limit)
    if check and lease is None:
        raise Findings(f"no beat holds the lease in {where} (prefix {prefix!r})")


def paused_entries(records: Mapping[str, tuple[str | None, str | None]]) -> dict[str, Pause]:
    """The entries paused now, by name (unreadable pause records left out)."""
    found = {}
    for name, (_, text) in sorted(records.items()):
        try:
            pause = None if text is None else decode_pause(name, text)
        except DefinitionError:
            continue
        if pause is not None and pause.paused:
            found[name] = pause
    return found


@dataclass(frozen=True)
class EntryLine:
    """One row of the entries table: the next slot as the leader plans it (None: none), why
    there is none ("paused", "max_runs 3 used up"), and the history in a line."""

    next_slot: int | None
    silent: str | None
    summary: Summary


@dataclass(frozen=True)
class Listing:
    """The entries table and what it leaves out, said rather than dropped."""

    lines: dict[str, EntryLine]
    #: The entries in the schedule (the beats' ``hashbeat_entries``), None without the app.
    total: int | None = None
    #: Rows cut by ``--limit``.
    more: int = 0
    #: Entries with no row, and why (cannot run; no copy on any worker now).
    left_out: dict[str, str] = field(default_factory=dict)


def entry_lines(
    store: Store,
    app: Celery | None,
    now: int,
    fenced: list[str],
    limit: int | None,
) -> Listing:
    """Up to ``limit`` rows (all for None), in name order, each with its next slot (known with
    the app, as the leader plans it from its fence) and the summary of its history: the
    entries the leader runs (a fanned-out entry as its copies), or without the app, those the
    store has fences for; with what is left out and why."""
    if app is None:
        names = sorted(fenced)
        chosen = names[:limit]
        lines = {n: EntryLine(None, None, summarize(records(store, n), now)) for n in chosen}
        return Listing(lines, more=len(names) - len(chosen))
    built = build_entries(app, now, store)
    runs = built.entries
    picked = runs[:limit]
    fences = store.fences([entry.name for entry in picked])
    lines = {
        e.name: EntryLine(
            built.next_slot(e.name, fences.get(e.name), now),
            built.silent(e.name, fences.get(e.name)),
            summarize(records(store, e.name), now),
        )
        for e in picked
    }
    left_out = {name: f"cannot run: {error}" for name, error in built.errors.items()}
    for name in built.idle:
        left_out.setdefault(name, "runs on workers, and has no copy on any worker now")
    return Listing(lines, built.planned.catalog.count(), len(runs) - len(picked), left_out)


def echo_entries(listing: Listing, now: int, limit: int) -> None:
    count = len(listing.lines)
    if listing.total is None:
        click.echo(f"entries   {count} listed, from the store's fences (hashbeat show NAME)")
    else:
        click.echo(
            f"entries   {listing.total} in the schedule; {count} listed, a fanned-out entry as "
            "its copies (hashbeat show NAME for the history)"
        )
    rows = []
    for name, line in listing.lines.items():
        last, slot = line.summary.last, line.next_slot
        rows.append(
            [
                name,
                (line.silent or "-") if slot is None else relative(slot, now),
                "" if last is None else f"{last.outcome} {relative(last.at, now)}",
                str(line.summary.sent),
                str(line.summary.skipped),
                str(line.summary.missed),
            ]
        )
    headers = ["ENTRY", "NEXT", "LAST OUTCOME", "SENT/1H", "SKIPPED/1H", "MISSED/1H"]
    if rows:
        click.echo(table(headers, rows, indent="  "))
    if listing.more:
        click.echo(
            f"  ... and {listing.more} more not listed (--limit {limit + listing.more}, or --json)"
        )
    for name, why in listing.left_out.items():
        click.echo(f"  not listed: {name}: {why} (hashbeat schedule says more)")


def echo_roster(roster: Roster, now: int) -> None:
    """The leader's last census of live workers: when, and who answered."""
    when = f"{stamp(roster.resolved_ms)} ({relative(roster.resolved_ms, now)})"
    if not roster.nodes:
        click.echo(f"workers   none answered the leader's census at {when}")
        return
    count = len(roster.nodes)
    click.echo(f"workers   {count} live in the leader's census of {when}")
    for line in textwrap.wrap(", ".join(roster.nodes), width=96, break_on_hyphens=False):
        click.echo(f"  {line}")


def roster_json(roster: Roster, now: int) -> dict[str, object]:
    """The roster for --json: the nodes, when the leader resolved them and how long ago."""
    return {
        "nodes": list(roster.nodes),
        "resolved": stamp_iso(roster.resolved_ms),
        "resolved_ms_ago": max(0, now - roster.resolved_ms),
    }


def role(beat: BeatInfo, lease: LeaseInfo | None) -> str:
    """The leader is whoever holds the lease; a beat whose last heartbeat said "leader" but
    that does not hold it now (it stopped, died, or lost the lease since) is not shown as
    leading. The words say only what is known: it holds no lease, not why."""
    if lease is not None and beat.token == lease.token:
        return "leader"
    return "standby" if beat.role == "standby" else "not leading (holds no lease)"
