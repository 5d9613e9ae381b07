"""``hashbeat status``: who leads, which beats are alive, what was enqueued last, the workers
the leader found alive and the runs now queued or running (DESIGN.md §11-12); ``--check`` turns
it into a health probe."""

from __future__ import annotations

import textwrap
import time
from datetime import datetime, timezone

import click

from ..settings import DEFAULT_KEY_PREFIX
from ..store import BeatInfo, LeaseInfo
from ..store.base import Roster
from .loading import app_option, app_settings, connected, find_celery_app
from .output import Findings, duration, echo_json, json_option, relative, stamp, table


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
    help="How many of the last enqueued slots to list (--json lists all).",
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
    workers and the runs now queued or running.

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
    options: dict[str, object] = {}
    app = find_celery_app(app_name)
    if app is not None:
        settings = app_settings(app)
        prefix = prefix or settings.key_prefix
        if store_url is None:
            store_url, options = settings.store_url, dict(settings.store_options)
    if store_url is None:
        raise click.UsageError("give the app with -A proj, or the store with --store URL")
    prefix = prefix or DEFAULT_KEY_PREFIX
    with connected(store_url, prefix, options) as store:
        where = store.url
        lease = store.leader()
        beats = store.beats()
        slots = sorted(store.last_slots().items(), key=lambda item: (-item[1], item[0]))
        roster = store.roster()
        running = dict(sorted(store.running().items()))
    now = int(time.time() * 1000)
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
            rows = [[name, stamp(slot), relative(slot, now)] for name, slot in slots[:limit]]
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
    if check and lease is None:
        raise Findings(f"no beat holds the lease in {where} (prefix {prefix!r})")


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


def stamp_iso(ms: int) -> str:
    """An instant as ISO 8601 in UTC, to the millisecond."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")
