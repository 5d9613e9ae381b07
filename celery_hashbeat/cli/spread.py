"""``hashbeat spread``: how the enqueues fall over a day or a week, hashed and as plain cron.

Every entry's fires in the window are counted per minute (per second when an entry can fire
within a minute), once as scheduled and once with every hash term at its lowest value, which is
what the same schedule written in plain cron would do. Peak over mean says how bunched the load
is: 1 is perfectly flat.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone, tzinfo
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
from celery_hashbeat.cli.terms import lowest
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.expr import CronExpr, CronSyntaxError, parse
from celery_hashbeat.expr.balance import assign, terms_of
from celery_hashbeat.expr.slots import (
    CalendarSlots,
    ChainSlots,
    CronSlots,
    IntervalSlots,
    Slots,
    to_ms,
)
from celery_hashbeat.schedules import hashcron, hashinterval
from celery_hashbeat.store import Store

if TYPE_CHECKING:
    from celery import Celery

#: Fires counted at most, over all distinct schedules, before spread gives up: a week of one
#: entry firing every second is 604,800.
MAX_FIRES = 5_000_000
CHART_HEIGHT = 6

Sources = list[tuple[Slots, int]]

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


@dataclass(frozen=True)
class Load:
    """Enqueues per bucket over the window."""

    counts: list[int]

    @property
    def total(self) -> int:
        return sum(self.counts)

    @property
    def peak(self) -> int:
        return max(self.counts)

    @property
    def mean(self) -> float:
        return self.total / len(self.counts)

    @property
    def ratio(self) -> float | None:
        """Peak over mean: 1 is flat, the number of buckets is everything in one."""
        return self.peak / self.mean if self.total else None


@dataclass(frozen=True)
class Window:
    start: datetime
    span: timedelta
    bucket: timedelta

    @property
    def bucket_ms(self) -> int:
        return self.bucket // timedelta(milliseconds=1)

    def count(self, sources: Sources) -> Load:
        """Every source's fires in the window, each weighted by how many entries share it."""
        start = to_ms(self.start)
        end = to_ms(self.start + self.span)
        counts = [0] * -(-(end - start) // self.bucket_ms)
        budget = MAX_FIRES
        for source, weight in sources:
            slot = source.next_after(start - 1)
            while slot < end:
                counts[(slot - start) // self.bucket_ms] += weight
                budget -= 1
                if not budget:
                    raise click.UsageError(
                        f"more than {MAX_FIRES:,} distinct fires in the window: too many to "
                        "count; try a day instead of --week"
                    )
                slot = source.next_after(slot)
        return Load(counts)

    def at(self, index: int) -> datetime:
        """The start of bucket ``index``, in the window's zone."""
        return datetime.fromtimestamp(
            self.start.timestamp() + self.bucket.total_seconds() * index, self.start.tzinfo
        )


def calendar_counts(entries: list[Entry], window: Window) -> tuple[int, int]:
    """How many slots of ``entries`` in the window their calendars leave out, and move."""
    start, end = to_ms(window.start), to_ms(window.start + window.span)
    excluded = moved = 0
    for source, weight in Counter(entry.source for entry in entries).items():
        if not isinstance(source, CalendarSlots):
            continue
        slot = source.inner.next_after(start - 1)
        while slot < end:
            fate = source.fate(slot)
            excluded += weight if fate is None else 0
            moved += weight if fate is not None and fate != slot else 0
            slot = source.inner.next_after(slot)
    return excluded, moved


def _grouped(sources: Iterable[Slots | CronExpr]) -> Sources:
    """Entries that share a slot source, or resolve to the same expression, count once, weighted."""
    return [
        (CronSlots(source) if isinstance(source, CronExpr) else source, weight)
        for source, weight in Counter(sources).items()
    ]


def expression_sources(expression: str, keys: list[str], zone: tzinfo) -> tuple[Sources, Sources]:
    """Hashed and plain sources for one expression under many keys."""
    hashed = _grouped(parse(expression, key, tz=zone) for key in keys)
    plain: Sources = [(CronSlots(parse(lowest(expression), tz=zone)), len(keys))]
    return hashed, plain


def balanced_expression_sources(expression: str, keys: list[str], zone: tzinfo) -> Sources:
    """One expression under many keys, balanced as one group (docs/design.md §16)."""
    assigned = assign(keys, terms_of(expression))
    return _grouped(parse(expression, key, tz=zone, offsets=assigned[key]) for key in keys)


def pure_sources(app: Celery, entries: list[Entry]) -> Sources:
    """Every entry's slots with hash terms as the key's hash alone gives them."""
    pure: list[Slots | CronExpr] = []
    for entry in entries:
        given = entry.schedule
        if isinstance(given, hashcron) and given.offsets is not None:
            zone = given.zone if given.zone is not None else app.timezone
            key = given.key if given.key is not None else entry.name
            pure.append(parse(given.expr, key, tz=zone, day_and=given.day_and))
        else:
            pure.append(entry.source)
    return _grouped(pure)


def app_sources(app: Celery, entries: list[Entry]) -> tuple[Sources, Sources, bool]:
    """Hashed and plain sources for every entry, and whether any fires within a minute."""
    hashed: list[Slots] = []
    plain: list[Slots | CronExpr] = []
    unhashed: dict[int, IntervalSlots] = {}
    fine = False
    for entry in entries:
        outer, given = entry.source, entry.schedule
        hashed.append(outer)
        # A calendar (docs/design.md §20) applies to the plain cron reading too.
        calendar = outer if isinstance(outer, CalendarSlots) else None
        source = calendar.inner if calendar is not None else outer
        if isinstance(given, hashcron):
            zone = given.zone if given.zone is not None else app.timezone
            unwrapped: Slots = CronSlots(parse(lowest(given.expr), tz=zone, day_and=given.day_and))
        elif isinstance(source, IntervalSlots) and isinstance(given, hashinterval):
            unwrapped = unhashed.setdefault(source.period, IntervalSlots(source.period, 0))
        else:
            unwrapped = source
        if calendar is not None and unwrapped is not source:
            unwrapped = CalendarSlots(unwrapped, calendar.calendar, calendar.tz, calendar.mode)
        plain.append(outer if unwrapped is source else unwrapped)
        if isinstance(source, CronSlots):
            fine |= source.expr.has_seconds
        elif isinstance(source, IntervalSlots | ChainSlots):
            fine |= (source.period if isinstance(source, IntervalSlots) else source.every) < 60_000
    return _grouped(hashed), _grouped(plain), fine


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
    window = _window(first, zone, week, fine)
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


def _window(first: date, zone: tzinfo, week: bool, fine: bool) -> Window:
    start = datetime.combine(first, time(), zone)
    end = datetime.combine(first + timedelta(days=7 if week else 1), time(), zone)
    span = timedelta(seconds=end.timestamp() - start.timestamp())  # real time: DST days differ
    return Window(start, span, timedelta(seconds=1 if fine else 60))


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
