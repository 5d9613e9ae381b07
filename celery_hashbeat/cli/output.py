"""What every command shares on the way out: exit codes, one-line errors, tables, times, JSON."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import click


class Exit(enum.IntEnum):
    """The exit codes of every command; the group's help lists them for operators."""

    OK = 0
    FINDINGS = 1  # lint found something, or status --check found no leader
    USAGE = 2  # a bad option, argument, expression or entry definition (click's own code)
    SETUP = 3  # the app, its settings or entries, or an optional dependency is not usable;
    # for the commands that change an entry, no entry of that name (admin.UnknownEntryError)
    STORE = 4  # the store is unreachable, refused the credentials, or is read-only
    CONFLICT = 5  # update: the entry changed meanwhile (admin.ConflictError)
    NOT_TRIGGERED = 6  # trigger: a run in progress and overlap skip (admin.RunInProgressError)


EXIT_CODES_HELP = """\b
Exit codes:
  0  success
  1  findings: lint warnings, or status --check found no leader
  2  usage: a bad option, argument or expression, or an entry definition
     refused (nothing stored changed); plan: the candidate changes something
  3  setup: the app, its hashbeat settings or entries, or an optional
     dependency cannot be used; or no entry of that name
  4  store: unreachable, it refused the credentials, or it is read-only
  5  conflict: update lost a race with another change of the entry
     (nothing written; read it again and repeat)
  6  not triggered: a run of the entry is in progress and its overlap is
     skip (trigger --force runs it anyway)"""

#: A URL's password: what ``redact`` hides (not the ``user:password@`` of the examples).
PASSWORD_IN_URL = re.compile(
    r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://(?!user:password@)[^\s:/@]*:)[^\s@/]+@"
)


def redact(text: str) -> str:
    """``text`` with the password of every URL in it hidden (``redis://user:***@host``)."""
    return PASSWORD_IN_URL.sub(r"\g<head>***@", text)


class Failure(click.ClickException):
    """A one-line error, no traceback; each subclass carries the exit code of its kind. No
    password is ever printed: any URL in the message is redacted."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class Findings(Failure):
    exit_code = Exit.FINDINGS


class SetupError(Failure):
    exit_code = Exit.SETUP


class StoreFailure(Failure):
    exit_code = Exit.STORE


def json_option(function: Any) -> Any:
    """The ``--json`` flag every command takes."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(function)


def echo_json(data: object) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], indent: str = "") -> str:
    """Left-aligned columns two spaces apart, headed by ``headers``."""
    lines = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        indent
        + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def duration(seconds: float) -> str:
    """A short human duration: ``850ms``, ``12.5s``, ``4m05s``, ``3h02m``, ``2d04h``."""
    seconds = abs(seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s".replace(".0s", "s")
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def relative(ms: int, now_ms: int) -> str:
    """``in 4m05s`` or ``12s ago``."""
    delta = (ms - now_ms) / 1000
    return f"in {duration(delta)}" if delta >= 0 else f"{duration(delta)} ago"


def stamp_iso(ms: int) -> str:
    """An instant as ISO 8601 in UTC, to the millisecond."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")
