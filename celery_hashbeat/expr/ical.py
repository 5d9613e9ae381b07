"""All-day events of an iCalendar file (RFC 5545), read once when a calendar is parsed.

Only what an exclusion calendar needs: each VEVENT's ``DTSTART;VALUE=DATE`` and ``DTEND`` (the
day after the last, as the RFC says; one day when absent), and ``RRULE:FREQ=YEARLY`` for a
holiday that comes back every year. Timed events are not whole days and are left out. Files
only: nothing is fetched from the network.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

from celery_hashbeat.expr.errors import CalendarError


def read_ical(path: str, spec: str) -> tuple[set[int], list[tuple[int, int]], set[tuple[int, int]]]:
    """The days of ``path``'s all-day events: single days and spans (inclusive ordinals), and
    (month, day) pairs of yearly ones."""
    path = path.strip()
    if "://" in path:
        raise CalendarError(
            f"exclude {spec!r}: only files are read; download the calendar and give its path"
        )
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CalendarError(
            f"exclude {spec!r}: cannot read the iCalendar file ({exc.__class__.__name__}: "
            f"{exc}); give the path of a readable .ics file"
        ) from None
    days: set[int] = set()
    spans: list[tuple[int, int]] = []
    yearly: set[tuple[int, int]] = set()
    if "BEGIN:VCALENDAR" not in text:
        raise CalendarError(f"exclude {spec!r}: {path} is not an iCalendar file (no VCALENDAR)")
    for number, event in enumerate(_events(text), 1):
        start = _day(event.get("DTSTART"), spec, number)
        if start is None:
            continue  # a timed event: not a whole day
        end = _day(event.get("DTEND"), spec, number)
        last = start if end is None or end <= start else end - 1
        rule = event.get("RRULE", "")
        if rule:
            parts = dict(p.partition("=")[::2] for p in rule[1].upper().split(";"))
            if (
                parts.get("FREQ") != "YEARLY"
                or set(parts) - {"FREQ", "INTERVAL"}
                or (parts.get("INTERVAL", "1") != "1")
            ):
                raise CalendarError(
                    f"exclude {spec!r}: event {number} repeats by {rule[1]!r}; only "
                    f"RRULE:FREQ=YEARLY is read, so list the other days as dates"
                )
            for ordinal in range(start, last + 1):
                found = date.fromordinal(ordinal)
                yearly.add((found.month, found.day))
        elif last == start:
            days.add(start)
        else:
            spans.append((start, last))
    return days, spans, yearly


def _events(text: str) -> list[dict[str, tuple[str, str]]]:
    """Each VEVENT's properties: name -> (parameters, value); folded lines joined."""
    lines: list[str] = []
    for raw in text.splitlines():
        if raw[:1] in (" ", "\t") and lines:
            lines[-1] += raw[1:]
        else:
            lines.append(raw)
    events: list[dict[str, tuple[str, str]]] = []
    current: dict[str, tuple[str, str]] | None = None
    for line in lines:
        head, _, value = line.partition(":")
        name, _, params = head.partition(";")
        name = name.upper()
        if name == "BEGIN" and value.upper() == "VEVENT":
            current = {}
        elif name == "END" and value.upper() == "VEVENT" and current is not None:
            events.append(current)
            current = None
        elif current is not None:
            current.setdefault(name, (params.upper(), value.strip()))
    return events


def _day(prop: tuple[str, str] | None, spec: str, number: int) -> int | None:
    """A DATE value as an ordinal; None for a DATE-TIME (or no value)."""
    if prop is None:
        return None
    params, value = prop
    if "T" in value and "VALUE=DATE" not in params:
        return None
    try:
        return date(int(value[:4]), int(value[4:6]), int(value[6:8])).toordinal()
    except ValueError:
        raise CalendarError(
            f"exclude {spec!r}: event {number} has the date {value!r}; iCalendar dates are YYYYMMDD"
        ) from None
