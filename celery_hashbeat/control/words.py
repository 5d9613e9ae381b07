"""A stored schedule in a few words, as the ``hashbeat`` commands and the console show it."""

from __future__ import annotations

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
