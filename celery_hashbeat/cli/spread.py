"""``hashbeat spread``: how the enqueues fall over a day or a week, hashed and as plain cron.

Every entry's fires in the window are counted per minute (per second when an entry can fire
within a minute), once as scheduled and once with every hash term at its lowest value, which is
what the same schedule written in plain cron would do. Peak over mean says how bunched the load
is: 1 is perfectly flat.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Any, TextIO

import click

from celery_hashbeat.cli.chart import axis, bars, columns, load_pyplot, write_png
from celery_hashbeat.cli.loading import (
    Built,
    app_option,
    app_settings,
    build_entries,
    connected,
    find_celery_app,
    zone_option,
)
from celery_hashbeat.cli.output import SetupError, StoreFailure, echo_json, json_option
from celery_hashbeat.cli.spread_sources import (
    app_sources,
    balanced_expression_sources,
    expression_sources,
    pure_sources,
)
from celery_hashbeat.cli.spread_window import Load, Window, calendar_counts, window_of
from celery_hashbeat.expr import CronSyntaxError, parse
from celery_hashbeat.expr.slots import to_ms
from celery_hashbeat.store import Store

if TYPE_CHECKING:
    from celery import Celery

CHART_HEIGHT = 6

TITLES = {
    "hashed": "hashed (as scheduled)",
    "pure": "hashed, pure (each key's own hash)",
    "balanced": "hashed, balanced (hashbeat_balance)",
    "plain": "plain cron (hash terms at lowest)",
}
PNG_TITLES = {
    "hashed": "hashed, as scheduled",
    "pure": "hashed, pure: each key's own hash",
    "balanced": "hashed, balanced: hashbeat_balance",
    "plain": "plain cron: every hash term at its lowest value",
}


@click.command()
@app_option
@click.option("--expr", "expression", metavar="EXPR", help="One expression, for every key.")
@click.option(
    "--keys",
    type=click.File("r"),
    help="With --expr: a file of keys (entry names), one a line; - reads standard input.",
)
@zone_option("Zone of the window (and of --expr); default UTC, or the app's timezone.")
@click.option("--date", "day", type=click.DateTime(["%Y-%m-%d"]), help="First day; default today.")
@click.option("--week", is_flag=True, help="Seven days instead of one.")
@click.option("--width", type=click.IntRange(10, 1000), help="Chart columns; default: fit.")
@click.option("--png", type=click.Path(dir_okay=False), help="Also draw the load into this PNG.")
@click.option(
    "--balanced",
    is_flag=True,
    help="Also show the load balanced (hashbeat_balance), beside pure hashing.",
)
@json_option
def spread(
    app_name: str | None,
    expression: str | None,
    keys: TextIO | None,
    tz: tzinfo | None,
    day: datetime | None,
    week: bool,
    width: int | None,
    png: str | None,
    balanced: bool,
    as_json: bool,
) -> None:
    """How the enqueues fall over a day, beside the same schedules as plain cron.

    Counts every entry's enqueues per minute (per second when an entry can fire more than once
    a minute) over a day (--week: seven), once as scheduled and once with every hash term at its
    lowest value (H -> 0, H(a-b) -> a, H/n -> */n), which is what plain cron would do. It
    prints peak, mean and peak/mean for both, and a bar chart of each (full height is the
    larger peak). With --balanced (or an app that balances its entries) it shows pure hashing
    and balanced hashing (docs/design.md §16) side by side. With the app, the entries are those
    the leader runs: the store's too, and a "workers": "*" entry as its copies on the workers
    of the leader's census. --png draws each load on a clock-time axis and its own scale; it
    needs matplotlib: pip install 'celery-hashbeat[plot]'.

    \b
    Examples:
      hashbeat spread -A proj
      hashbeat spread --expr "H * * * *" --keys names.txt
      seq -f "job-%g" 1000 | hashbeat spread --expr "H H(0-5) * * *" --keys -
      celery -A proj hashbeat spread --week --png load.png
      seq -f "job-%g" 60 | hashbeat spread --expr "H * * * *" --keys - --balanced
    """
    pyplot = load_pyplot() if png else None  # before anything is printed
    if expression is not None:
        if keys is None:
            raise click.UsageError("--expr needs --keys FILE (the entry names, one a line)")
        names = [line.strip() for line in keys if line.strip()]
        if not names:
            raise click.UsageError("the --keys file holds no keys")
        zone = tz or timezone.utc
        try:
            hashed, plain = expression_sources(expression, names, zone)
            fine = parse(expression, names[0]).has_seconds
            even = balanced_expression_sources(expression, names, zone) if balanced else None
        except CronSyntaxError as exc:
            raise click.BadParameter(str(exc), param_hint="--expr") from None
        what = f"{expression!r} for {len(names)} keys"
    else:
        app = find_celery_app(app_name)
        if app is None:
            raise click.UsageError("give the app with -A proj, or --expr EXPR --keys FILE")
        built, even_built, why = planned_entries(app, balanced)
        if built.errors:
            raise SetupError(next(iter(built.errors.values())))
        for name in sorted(built.idle.keys() & built.every_worker):
            click.echo(
                f"spread: entry {name!r} runs on every live worker, and {why}, so it is left "
                "out (hashbeat schedule lists its copies)",
                err=True,
            )
        entries = built.entries
        if not entries:
            raise SetupError("the app's beat_schedule is empty: nothing to spread")
        zone = tz or app.timezone
        hashed, plain, fine = app_sources(app, entries)
        even = None
        if even_built is not None:
            even = app_sources(app, even_built.entries)[0]
            hashed = pure_sources(app, entries)
        what = f"{len(entries)} entries"
    first = day.date() if day else datetime.now(zone).date()
    window = window_of(first, zone, week, fine)
    excluded, moved = (0, 0) if expression is not None else calendar_counts(entries, window)
    loads = {"hashed": window.count(hashed), "plain": window.count(plain)}
    if even is not None:
        loads = {"pure": loads["hashed"], "balanced": window.count(even), "plain": loads["plain"]}
    if as_json:
        echo_json(
            {
                "what": what,
                "start": window.start.isoformat(),
                "end": (window.start + window.span).isoformat(),
                "bucket_seconds": window.bucket.total_seconds(),
                **{name: _summary(load, window) for name, load in loads.items()},
                "calendars": {"excluded": excluded, "moved": moved},
            }
        )
    else:
        _print(what, window, loads, width)
        if excluded or moved:
            click.echo(
                f"calendars (exclude): {excluded} slot(s) on excluded days left out, {moved} "
                "moved to another day (counted where they go)"
            )
    if png:
        write_png(
            pyplot,
            png,
            window.start,
            window.span,
            [(PNG_TITLES[name], load.counts) for name, load in loads.items()],
            f"Enqueues of {what} per {window.bucket.total_seconds():g} s from "
            f"{window.start:%Y-%m-%d %H:%M %Z}",
        )


def planned_entries(app: Celery, balanced: bool) -> tuple[Built, Built | None, str]:
    """The app's entries as the leader runs them (the store's entries, and the ``"*"`` entries'
    copies on the workers of the leader's census, read from the store), and balanced too when
    ``balanced`` or the app balances; and why a ``"*"`` entry has no copies, in words."""
    now = to_ms(datetime.now(timezone.utc))
    settings = app_settings(app)

    def build(store: Store | None) -> tuple[Built, Built | None]:
        built = build_entries(app, now, store)
        wanted = balanced or bool(built.balanced)
        return built, build_entries(app, now, store, balance=True) if wanted else None

    try:
        with connected(settings.store_url, settings.key_prefix, settings.store_options) as store:
            built, even = build(store)
    except (StoreFailure, SetupError) as exc:  # unreachable, or a store no command can share
        click.echo(
            f"spread: the store cannot be read ({exc.message}), so only the app's own entries "
            "are counted",
            err=True,
        )
        return (*build(None), "the store cannot be read")
    if built.planned.roster is None:
        return built, even, "no leader has taken a census of live workers yet"
    return built, even, "no worker answered the leader's census"


def _summary(load: Load, window: Window) -> dict[str, Any]:
    busiest = load.counts.index(load.peak)
    return {
        "total": load.total,
        "peak": load.peak,
        "peak_at": window.at(busiest).isoformat() if load.total else None,
        "mean": round(load.mean, 4),
        "peak_to_mean": None if load.ratio is None else round(load.ratio, 4),
    }


def _print(what: str, window: Window, loads: dict[str, Load], width: int | None) -> None:
    per = "second" if window.bucket < timedelta(minutes=1) else "minute"
    zone = window.start.tzname()
    days = window.span.days
    period = f"{window.start:%Y-%m-%d}" + (f" + {days} days" if days > 1 else "")
    click.echo(f"Enqueues of {what} per {per}, {period} ({zone})")
    if width is None:
        width = max(20, min(120, shutil.get_terminal_size().columns - 2))
    top = max(load.peak for load in loads.values())
    for name, load in loads.items():
        ratio = "-" if load.ratio is None else f"{load.ratio:.2f}"
        peak_at = window.at(load.counts.index(load.peak))
        click.echo("")
        click.echo(
            f"{TITLES[name]}: peak {load.peak}/{per} at {peak_at:%a %H:%M:%S}, "
            f"mean {load.mean:.2f}, peak/mean {ratio}"
        )
        for row in bars(columns(load.counts, width), top, CHART_HEIGHT):
            click.echo(f"|{row}")
    shown = len(columns(loads["plain"].counts, width))
    click.echo(" " + axis(window.start, window.span, shown))
    click.echo(f"full height = {top} per {per}; each column shows the peak of its span")
