"""``hashbeat lint``: schedules that will bunch up or run unevenly, in Jenkins' spirit.

Jenkins warns "Spread load evenly by using 'H * * * *' rather than '0 * * * *'"; this command does
the same for every expression of an app (hashcron entries, and crontab entries, which are where
literal minutes usually hide) or for expressions given on the command line.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import click
from celery.schedules import crontab

from celery_hashbeat.cli.loading import app_option, beat_schedule, find_celery_app
from celery_hashbeat.cli.output import Exit, SetupError, echo_json, json_option
from celery_hashbeat.cli.terms import FieldText, crontab_text, fields_of, literal, stepped
from celery_hashbeat.expr import CronSyntaxError, parse
from celery_hashbeat.expr.fields import Field
from celery_hashbeat.expr.grammar import STAR
from celery_hashbeat.schedules import hashcron

#: Where a step wraps around, per field: (cycle length, unit, what the wrap is called).
WRAPS = {
    Field.SECOND: (60, "seconds", "the top of the minute"),
    Field.MINUTE: (60, "minutes", "the top of the hour"),
    Field.HOUR: (24, "hours", "midnight"),
    Field.MONTH: (12, "months", "the new year"),
    Field.DAY_OF_WEEK: (7, "days", "the week's turn"),
}
SPREADING = (Field.SECOND, Field.MINUTE)
MONTH_LENGTHS = range(28, 32)


@dataclass(frozen=True)
class Finding:
    """One warning: which rule, where, what to do, and the expression rewritten when a rewrite
    is the fix."""

    code: str
    field: str
    term: str
    message: str
    suggestion: str | None = None


@dataclass
class Result:
    """One expression checked: an entry's or one given on the command line."""

    expression: str
    entry: str | None = None
    kind: str = "expression"
    warnings: list[Finding] = field(default_factory=list)
    error: str | None = None


def lint_expression(expression: str) -> list[Finding]:
    """Every warning for one accepted expression."""
    fields = fields_of(expression)
    found = list(_every_unit(fields))
    for index, written in enumerate(fields):
        if written.field in SPREADING:
            found += _literal(fields, index) + _unhashed_steps(fields, index)
        if written.field is Field.DAY_OF_MONTH:
            found += _month_turn(written)
        elif written.field in WRAPS:
            found += _uneven_wrap(written)
    return found


def _replaced(fields: list[FieldText], index: int, text: str) -> str:
    return " ".join(text if i == index else f.text for i, f in enumerate(fields))


def _every_unit(fields: list[FieldText]) -> Iterator[Finding]:
    """``* * * * *``: Jenkins' "do you really mean every minute?"."""

    def every(written: FieldText) -> bool:
        match = STAR.fullmatch(written.text)
        return match is not None and match["step"] in (None, "1")

    finest = fields[-5]  # the minute field; seconds, when given, come before it
    if len(fields) == 6 and every(fields[0]):
        finest, unit = fields[0], "second"
    elif every(finest) and (len(fields) == 5 or literal(Field.SECOND, fields[0].text) is not None):
        unit = "minute"
    else:
        return
    index = fields.index(finest)
    yield Finding(
        "every-" + unit,
        finest.field.label,
        finest.text,
        f"fires every {unit}: did you mean H (once {'an hour' if unit == 'minute' else 'a minute'}"
        f", at a {unit} the key picks)? For every n {unit}s write H/n",
        _replaced(fields, index, "H"),
    )


def _literal(fields: list[FieldText], index: int) -> list[Finding]:
    """``0 * * * *``: every job written so starts in the same minute."""
    written = fields[index]
    values = [literal(written.field, term) for term in written.terms]
    if None in values:
        return []
    label, text = written.field.label, written.text
    if len(values) == 1:
        hint = "H"
    else:
        ordered = sorted(v for v in values if v is not None)
        gaps = {b - a for a, b in itertools.pairwise(ordered)}
        if len(gaps) != 1 or gaps.pop() * len(ordered) != 60:
            return []
        hint = f"H/{60 // len(ordered)}"
    return [
        Finding(
            f"literal-{label}",
            label,
            text,
            f"{label} {text}: every job written so runs in the same {label}; use {hint} "
            f"instead of {text} to spread them (the key picks a fixed {label} per job)",
            _replaced(fields, index, hint),
        )
    ]


def _unhashed_steps(fields: list[FieldText], index: int) -> list[Finding]:
    """``*/15``: all such jobs run at 0, 15, 30 and 45."""
    written = fields[index]
    found = []
    for term in written.terms:
        step = stepped(written.field, term)
        if step is None or step.hashed or step.step < 2:
            continue
        if (step.low, step.high) != (written.field.low, written.field.high):
            continue
        hint = f"H/{step.step}"
        found.append(
            Finding(
                "unhashed-step",
                written.field.label,
                term,
                f"use {hint} instead of {term}: as often, but each job at its own offset "
                f"instead of all of them at {step.low}, {step.low + step.step}, ...",
                _replaced(fields, index, written.text.replace(term, hint, 1)),
            )
        )
    return found


def _uneven_wrap(written: FieldText) -> list[Finding]:
    """``H/7`` in minutes: 60 is no multiple of 7, so one gap each hour is not 7 minutes."""
    cycle, unit, turn = WRAPS[written.field]
    found = []
    for term in written.terms:
        step = stepped(written.field, term)
        if step is None or step.step < 2 or step.low != written.field.low:
            continue
        if step.high < written.field.low + cycle - 1:
            continue  # a window such as H(0-29)/10 leaves its gap on purpose
        gaps = set()
        for start in step.starts:
            values = sorted({value % cycle for value in step.runs(start)})
            if len(values) > 1:
                gaps.add(cycle - values[-1] + values[0])
        if not gaps or gaps == {step.step}:
            continue
        divisors = ", ".join(str(d) for d in range(2, cycle // 2 + 1) if cycle % d == 0)
        fix = (
            f"use a step that divides {cycle} ({divisors})"
            if divisors
            else f"list the {unit} you want instead"
        )
        shown = f"{min(gaps)}-{max(gaps)}" if len(gaps) > 1 else str(min(gaps))
        found.append(
            Finding(
                "uneven-wrap",
                written.field.label,
                term,
                f"{term} in {written.field.label}: {cycle} is not a multiple of {step.step}, so "
                f"across {turn} the gap is {shown} {unit} instead of {step.step}; {fix}",
            )
        )
    return found


def _month_turn(written: FieldText) -> list[Finding]:
    """``*/3`` in day-of-month: the 31st, then the 1st a day later."""
    if len(written.terms) != 1:
        return []
    term = written.terms[0]
    step = stepped(written.field, term)
    if step is None or step.step < 2:
        return []
    turns = [
        (length - runs[-1] + start, length)
        for start in step.starts
        for length in MONTH_LENGTHS
        if (runs := step.runs(start, length))
    ]
    if not turns:
        return []
    gap, length = min(turns)
    if gap >= step.step:
        return []
    days = "day" if gap == 1 else "days"
    return [
        Finding(
            "month-turn-gap",
            written.field.label,
            term,
            f"{term} in day-of-month restarts each month: after a {length}-day month it runs "
            f"again {gap} {days} after its last run instead of {step.step}; if the rhythm "
            f"matters, use hashinterval(timedelta(days={step.step}))",
        )
    ]


def _app_results(definitions: Mapping[str, Any]) -> Iterator[Result]:
    for name, definition in sorted(definitions.items()):
        schedule = definition.get("schedule") if isinstance(definition, Mapping) else None
        if isinstance(schedule, hashcron):
            yield _checked(Result(schedule.expr, name, "hashcron"))
        elif isinstance(schedule, crontab):
            result = _checked(Result(crontab_text(schedule), name, "crontab"))
            if result.error is None:  # crontab accepts spellings our grammar need not
                yield result


def _checked(result: Result) -> Result:
    try:
        parse(result.expression, "lint")
    except CronSyntaxError as exc:
        result.error = str(exc)
    else:
        result.warnings = lint_expression(result.expression)
    return result


@click.command()
@click.argument("expressions", nargs=-1, metavar="[EXPR]...")
@app_option
@json_option
def lint(expressions: tuple[str, ...], app_name: str | None, as_json: bool) -> None:
    """Warn about schedules that bunch up or run unevenly.

    Checks the EXPRs given, or every hashcron and crontab entry of the app's beat_schedule:

    \b
      literal-minute  0 * * * *     all such jobs start in minute 0: use H
      unhashed-step   */15 * * * *  all run at :00 :15 :30 :45: use H/15
      every-minute    * * * * *     did you mean H (hourly)?
      uneven-wrap     H/7 * * * *   60 % 7 != 0: one gap an hour is not 7 minutes
      month-turn-gap  H H */3 * *   the 31st, then the 1st a day later

    Exits 0 when all is clean, 1 when there are warnings, 2 for a bad EXPR, 3 when an app
    entry has an expression that does not parse.

    \b
    Examples:
      hashbeat lint "0 * * * *" "*/15 9-17 * * 1-5"
      hashbeat lint -A proj --json
      celery -A proj hashbeat lint
    """
    app = None if expressions else find_celery_app(app_name)
    if not expressions and app is None:
        raise click.UsageError("give one or more EXPRs, or the app with -A proj")
    if app is not None:
        results = list(_app_results(beat_schedule(app)))
    else:
        results = []
        for expression in expressions:
            result = _checked(Result(expression))
            if result.error is not None:
                raise click.BadParameter(result.error, param_hint=repr(expression))
            results.append(result)
    count = sum(len(r.warnings) for r in results)
    if as_json:
        echo_json({"warnings": count, "results": [asdict(r) for r in results]})
    else:
        _print(results, count)
    broken = [r for r in results if r.error is not None]
    if broken:
        names = ", ".join(repr(r.entry) for r in broken)
        raise SetupError(f"entries with an expression that does not parse: {names}")
    if count:
        click.get_current_context().exit(Exit.FINDINGS)


def _print(results: list[Result], count: int) -> None:
    for result in results:
        if not result.warnings and result.error is None:
            continue
        title = f"{result.entry}  ({result.kind}) " if result.entry else ""
        click.echo(f"{title}{result.expression}")
        if result.error is not None:
            click.echo("  error: " + result.error.replace("\n", "\n  "))
        for finding in result.warnings:
            click.echo(f"  warning[{finding.code}]: {finding.message}")
            if finding.suggestion:
                click.echo(f"    suggestion: {finding.suggestion}")
    checked = len(results)
    click.echo(
        f"{count} warning{'s' if count != 1 else ''} in {checked} expression"
        f"{'s' if checked != 1 else ''}"
    )
