"""``hashbeat status``: who leads, which beats are alive, what was enqueued last; ``--check``
turns it into a health probe."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import click

from ..settings import DEFAULT_KEY_PREFIX
from ..store import BeatInfo, LeaseInfo
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
    """Show the store, the leader and its lease, live beats, and the last slots enqueued.

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
    if check and lease is None:
        raise Findings(f"no beat holds the lease in {where} (prefix {prefix!r})")


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
