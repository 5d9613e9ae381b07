"""``hashbeat explain``: what an expression resolves to for a key, and when it fires."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING

import click

from celery_hashbeat.cli.loading import (
    app_option,
    app_settings,
    build_entries,
    connected,
    find_celery_app,
    zone_option,
)
from celery_hashbeat.cli.output import SetupError, StoreFailure
from celery_hashbeat.entries.balancing import read_stored
from celery_hashbeat.expr import CronExpr, CronSyntaxError, NoFireTimeError, parse
from celery_hashbeat.expr.balance import shape_of, terms_of
from celery_hashbeat.expr.calendar import ON_EXCLUDED, parse_calendar
from celery_hashbeat.expr.errors import CalendarError
from celery_hashbeat.expr.slots import CalendarSlots, CronSlots, to_datetime, to_ms
from celery_hashbeat.schedules import hashcron

if TYPE_CHECKING:
    from celery import Celery


@click.command()
@click.argument("expression")
@app_option
@click.option("--key", "-k", help="The key that seeds H terms: the beat_schedule entry's name.")
@zone_option("IANA time zone of the schedule [default: the app's under celery -A, else UTC].")
@click.option(
    "-n",
    "count",
    default=5,
    show_default=True,
    type=click.IntRange(1, 1000),
    help="How many fire times to show.",
)
@click.option("--day-and", is_flag=True, help="A day must match both day fields (Celery's rule).")
@click.option("--after", type=click.DateTime(), help="Start after this local time instead of now.")
@click.option(
    "--exclude",
    metavar="DAYS",
    multiple=True,
    help="Days it does not fire on (repeatable), as an entry's exclude list: 2026-12-25, "
    "2026-12-24..2026-12-31, *-12-25, sat,sun, holidays:US, ical:/path/file.ics.",
)
@click.option(
    "--on-excluded",
    type=click.Choice(ON_EXCLUDED),
    help="What a slot on an excluded day does [default: skip].",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def explain(
    expression: str,
    app_name: str | None,
    key: str | None,
    tz: tzinfo | None,
    count: int,
    day_and: bool,
    after: datetime | None,
    exclude: tuple[str, ...],
    on_excluded: str | None,
    as_json: bool,
) -> None:
    """Show EXPRESSION resolved for a key, in English, with its next fire times.

    With the app (-A, or celery -A proj hashbeat explain), a key that names a balanced entry of
    the same shape (hashbeat_balance, or hashcron(..., balanced=True)) shows the values the
    balancer gives it, beside those of the hash alone.

    \b
    Examples:
      hashbeat explain "H * * * *" --key refresh-prices
      hashbeat explain "H/15 H(9-16) * * 1-5" --key report --tz Europe/Riga -n 10
      hashbeat explain @daily --key nightly --json
      hashbeat explain "H 9 * * *" --key report --exclude sat,sun --exclude holidays:US
      celery -A proj hashbeat explain "H * * * *" --key refresh-prices
    """
    if key == "":
        raise click.BadParameter(
            "an empty key seeds nothing useful: give the beat_schedule entry's name, or leave "
            "--key out for an expression without H",
            param_hint="'--key'",
        )
    app = find_celery_app(app_name)
    if tz is None:
        tz = app.timezone if app is not None else timezone.utc
    try:
        hashed = parse(expression, key, tz=tz, day_and=day_and)
        found = None if app is None or key is None else balanced_offsets(app, key, expression)
        offsets = None if found is None else found[0]
        expr = parse(expression, key, tz=tz, day_and=day_and, offsets=offsets)
        start = after.replace(tzinfo=expr.tz) if after else datetime.now(expr.tz)
        fires = []
        for when in expr.iter(start):
            fires.append(when)
            if len(fires) == count:
                break
    except CronSyntaxError as exc:
        raise click.BadParameter(str(exc), param_hint="EXPRESSION") from None
    except NoFireTimeError as exc:
        raise click.ClickException(f"{expression!r} has no more fire times: {exc}") from None
    if exclude or on_excluded:
        days = excluded_days(expression, expr, list(exclude), on_excluded, start, count)
        fires = [moment for moment, note in days if not note.startswith("excluded")][:count]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "expression": expression,
                    "key": key,
                    "tz": str(tz),
                    "resolved": str(expr),
                    **(
                        {}
                        if found is None
                        else {
                            "balanced": {
                                "offsets": list(found[0]),
                                "hashed": str(hashed),
                                "from": found[1],
                            }
                        }
                    ),
                    "description": expr.describe(),
                    "next": [
                        {"local": f.isoformat(), "utc": f.astimezone(timezone.utc).isoformat()}
                        for f in fires
                    ],
                    **(
                        {
                            "exclude": list(exclude),
                            "on_excluded": on_excluded or "skip",
                            "days": [{"local": m.isoformat(), "note": n} for m, n in days],
                        }
                        if exclude
                        else {}
                    ),
                },
                indent=2,
            )
        )
        return
    click.echo(f"expression   {expression}" + (f"  (key {key!r})" if key else ""))
    click.echo(f"resolved     {expr}")
    if found is not None:
        moved = (
            "the hash's own values fit" if str(hashed) == str(expr) else f"the hash gives {hashed}"
        )
        click.echo(f"balanced     yes ({found[1]}): {moved}")
    click.echo(f"meaning      {expr.describe()} ({tz})")
    if exclude:
        click.echo(f"excluding    {'; '.join(exclude)}  (on_excluded {on_excluded or 'skip'})")
        click.echo(f"next {count} fire times, with the slots excluded or moved among them:")
        for when, note in days:
            utc = when.astimezone(timezone.utc)
            line = f"  {when:%a %Y-%m-%d %H:%M:%S %Z}   {utc:%Y-%m-%d %H:%M:%S} UTC"
            click.echo(f"{line}   {note}".rstrip())
        return
    click.echo(f"next {count} fire times:")
    for when in fires:
        utc = when.astimezone(timezone.utc)
        click.echo(f"  {when:%a %Y-%m-%d %H:%M:%S %Z}   {utc:%Y-%m-%d %H:%M:%S} UTC")


def excluded_days(
    expression: str,
    expr: CronExpr,
    exclude: list[str],
    on_excluded: str | None,
    start: datetime,
    count: int,
) -> list[tuple[datetime, str]]:
    """The next ``count`` fire times with a calendar, and among them each slot it excludes
    ("excluded") or moves ("excluded, moved to ..."; its new time says "moved from ...")."""
    if not exclude:
        raise click.BadParameter("give the days to exclude with it", param_hint="'--on-excluded'")
    try:
        calendar = parse_calendar(exclude)
        slots = CalendarSlots(CronSlots(expr), calendar, expr.tz, on_excluded or "skip")
        fires, ms = [], to_ms(start)
        for _ in range(count):
            ms = slots.next_after(ms)
            fires.append(ms)
    except CalendarError as exc:
        raise click.BadParameter(str(exc), param_hint="'--exclude'") from None
    except NoFireTimeError as exc:
        raise click.ClickException(f"{expression!r} with that calendar: {exc}") from None
    notes = dict.fromkeys(fires, "")
    inner, ms = CronSlots(expr), to_ms(start)
    while (ms := inner.next_after(ms)) <= fires[-1]:
        fate = slots.fate(ms)
        if fate == ms:
            continue
        local = to_datetime(ms).astimezone(expr.tz)
        if fate is None:
            notes[ms] = "excluded"
            continue
        target = to_datetime(fate).astimezone(expr.tz)
        notes[ms] = f"excluded, moved to {target:%a %Y-%m-%d}"
        if fate in notes and not notes[fate].startswith("excluded"):
            joined = notes[fate] + ", " if notes[fate] else "moved from "
            notes[fate] = f"{joined}{local:%a %Y-%m-%d}"
    return [(to_datetime(ms).astimezone(expr.tz), note) for ms, note in sorted(notes.items())]


def balanced_offsets(app: Celery, key: str, expression: str) -> tuple[tuple[int, ...], str] | None:
    """The balancer's offsets for the app's entry named ``key``, when it is balanced and has the
    shape of ``expression``, and where they come from: the leader's assignment in the store, or,
    when the store cannot say, the app's schedule as the Scheduler would balance it."""
    settings = app_settings(app)
    stored: dict[str, tuple[int, ...]] = {}
    now = int(time.time() * 1000)
    built = None
    try:
        with connected(settings.store_url, settings.key_prefix, settings.store_options) as store:
            built = build_entries(app, now, store)
            stored = read_stored(store.shared("balance"))
    except (StoreFailure, SetupError, ValueError):
        pass  # the app's schedule still says what the balancer would choose
    if built is None:
        built = build_entries(app, now)
    entry = next((entry for entry in built.entries if entry.name == key), None)
    if entry is None or not isinstance(entry.schedule, hashcron):
        return None
    if shape_of(entry.schedule.expr) != shape_of(expression):
        return None
    if fits(stored.get(key), expression):
        return stored[key], "the leader's assignment in the store"
    offsets = built.balanced.get(key)
    return None if offsets is None else (offsets, "as the app's schedule balances it")


def fits(offsets: object, expression: str) -> bool:
    """Whether ``offsets``, read from the store, can place the hash terms of ``expression``."""
    terms = terms_of(expression)
    return (
        isinstance(offsets, tuple)
        and len(offsets) == len(terms)
        and all(
            isinstance(offset, int) and 0 <= offset < term.count
            for offset, term in zip(offsets, terms, strict=True)
        )
    )
