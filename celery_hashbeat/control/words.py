"""A stored schedule and an instant in a few words, as the ``hashbeat`` commands and the console
show them."""

from __future__ import annotations

from datetime import datetime, timezone, tzinfo
from typing import Any


def schedule_text(data: Any) -> str:
    """A stored schedule (definitions.py's JSON data) in a few words."""
    if not isinstance(data, dict):
        return str(data)
    if "hashcron" in data:
        words = [str(data["hashcron"])]
        words += [f"({data['tz']})"] if data.get("tz") else []
        words += ["day_and"] if data.get("day_and") else []
        return " ".join(words) + excluding_text(data)
    if "hashinterval" in data:
        return f"hashinterval {data['hashinterval']:g}s" + excluding_text(data)
    if "every" in data:
        return f"every {data['every']:g}s"
    if "crontab" in data:
        fields = data["crontab"]
        order = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
        return "crontab " + " ".join(str(fields.get(field, "*")) for field in order)
    if "solar" in data:
        fields = data["solar"]
        return f"solar {fields.get('event')} {fields.get('lat')},{fields.get('lon')}"
    if "at" in data:
        return f"at {data['at']} (one-shot)"
    return str(data)


def entry_schedule_text(definition: dict[str, Any]) -> str:
    """An entry's schedule in a few words, with the days its definition excludes (the entry's
    ``exclude`` key, beside any its schedule has)."""
    return schedule_text(definition.get("schedule")) + excluding_text(definition)


def excluding_text(data: dict[str, Any]) -> str:
    """``, excluding sat,sun; holidays:US (next_business_day)`` for a schedule with a calendar
    (docs/design.md §20)."""
    if not data.get("exclude"):
        return ""
    mode = data.get("on_excluded")
    return f", excluding {'; '.join(data['exclude'])}" + (f" ({mode})" if mode else "")


def stamp(ms: int, zone: tzinfo = timezone.utc, millis: bool = False) -> str:
    """An instant for tables: ``2026-11-22 14:37:00 UTC``, with milliseconds when present or
    when ``millis`` asks for them always (a column of instants that must line up)."""
    when = datetime.fromtimestamp(ms / 1000, zone)
    text = f"{when:%Y-%m-%d %H:%M:%S}"
    if ms % 1000 or millis:
        text += f".{ms % 1000:03d}"
    return f"{text} {when.tzname()}"
