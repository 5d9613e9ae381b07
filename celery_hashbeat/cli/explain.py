"""``hashbeat explain``: what an expression resolves to for a key, and when it fires."""

from __future__ import annotations

import json
from datetime import datetime, timezone, tzinfo

import click

from ..expr import CronSyntaxError, NoFireTimeError, parse
from .loading import find_celery_app, zone_option


@click.command()
@click.argument("expression")
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
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def explain(
    expression: str,
    key: str | None,
    tz: tzinfo | None,
    count: int,
    day_and: bool,
    after: datetime | None,
    as_json: bool,
) -> None:
    """Show EXPRESSION resolved for a key, in English, with its next fire times.

    \b
    Examples:
      hashbeat explain "H * * * *" --key refresh-prices
      hashbeat explain "H/15 H(9-16) * * 1-5" --key report --tz Europe/Riga -n 10
      hashbeat explain @daily --key nightly --json
    """
    if key == "":
        raise click.BadParameter(
            "an empty key seeds nothing useful: give the beat_schedule entry's name, or leave "
            "--key out for an expression without H",
            param_hint="'--key'",
        )
    if tz is None:
        app = find_celery_app(None)
        tz = app.timezone if app is not None else timezone.utc
    try:
        expr = parse(expression, key, tz=tz, day_and=day_and)
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
    if as_json:
        click.echo(
            json.dumps(
                {
                    "expression": expression,
                    "key": key,
                    "tz": str(tz),
                    "resolved": str(expr),
                    "description": expr.describe(),
                    "next": [
                        {"local": f.isoformat(), "utc": f.astimezone(timezone.utc).isoformat()}
                        for f in fires
                    ],
                },
                indent=2,
            )
        )
        return
    click.echo(f"expression   {expression}" + (f"  (key {key!r})" if key else ""))
    click.echo(f"resolved     {expr}")
    click.echo(f"meaning      {expr.describe()} ({tz})")
    click.echo(f"next {count} fire times:")
    for when in fires:
        utc = when.astimezone(timezone.utc)
        click.echo(f"  {when:%a %Y-%m-%d %H:%M:%S %Z}   {utc:%Y-%m-%d %H:%M:%S} UTC")
