"""An entry's fields as people type them, read into the definition ScheduleAdmin takes: the
``hashbeat add`` / ``update`` options and the console's entry form read through this one place.
Only the text is read here (which schedule, numbers, JSON, lists); what it means is checked by
ScheduleAdmin, the beats' own build. Each refusal names the field it is about, so that the CLI
can name its option and the console can put it beside its field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from celery_hashbeat.control.refusals import AdminError
from celery_hashbeat.control.schedule_data import schedule_object
from celery_hashbeat.control.stored_text import DefinitionError

#: The fields that give the schedule: one of them, with ``tz`` for a cron expression.
SCHEDULE_FIELDS = ("cron", "every", "interval", "at")

#: The fields kept in the entry's publish options.
OPTION_FIELDS = ("queue", "expires", "priority")


class FieldError(AdminError):
    """The text of ``fields`` (one, or those that clash) could not be read: ``what`` says why
    and what to give. ``whole``: ``what`` is a whole message already (naming the entry)."""

    def __init__(self, name: str, fields: tuple[str, ...], what: str, whole: bool = False) -> None:
        super().__init__(what if whole else f"entry {name!r}: {'/'.join(fields)}: {what}")
        self.entry, self.fields, self.what, self.whole = name, fields, what, whole


def read_schedule(name: str, given: Mapping[str, Any], current: Any = None) -> Any:
    """The schedule the fields give (None if none), as the object ScheduleAdmin takes. On an
    update of a hashcron (``current``, its stored data), ``cron`` keeps its time zone and
    ``tz`` alone keeps its expression, so that only what is given changes."""
    chosen = tuple(key for key in SCHEDULE_FIELDS if given.get(key) is not None)
    if len(chosen) > 1:
        raise FieldError(
            name, chosen, "give one schedule only: a cron expression, an interval or an instant"
        )
    cron = dict(current) if isinstance(current, dict) and "hashcron" in current else None
    tz = given.get("tz")
    if tz is not None and chosen != ("cron",) and (chosen or cron is None):
        raise FieldError(
            name, ("tz",), "it is the time zone of a cron expression: give the expression with it"
        )
    if not chosen and tz is None:
        return None
    key = chosen[0] if chosen else "cron"
    text = given.get(key)
    if key == "cron":
        data: dict[str, Any] = {**(cron or {}), "hashcron": text or (cron or {}).get("hashcron")}
        if tz is not None:
            data["tz"] = tz
    elif key == "at":
        data = {"at": text}
    else:
        data = {"every" if key == "every" else "hashinterval": number(name, key, text or "")}
    try:
        return schedule_object(name, data)
    except DefinitionError as exc:
        raise FieldError(name, (key,), str(exc), whole=True) from None


def number(name: str, field: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise FieldError(name, (field,), f"{text!r} is not a number of seconds") from None


def whole(name: str, field: str, text: str, least: int) -> int:
    if not text.strip().isdigit() or int(text) < least:
        raise FieldError(name, (field,), f"give a whole number of at least {least}, not {text!r}")
    return int(text)


def read_json(name: str, field: str, text: str, kind: type) -> Any:
    """``text`` as JSON of ``kind`` (list or dict), or a refusal with an example."""
    what, example = ("list", "'[42, \"eu\"]'") if kind is list else ("object", "'{\"full\": true}'")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise FieldError(
            name, (field,), f"not JSON ({exc}); give a JSON {what}: {example}"
        ) from None
    if not isinstance(value, kind):
        raise FieldError(name, (field,), f"give a JSON {what}, such as {example}, not {text}")
    return value


def read_changes(
    name: str, given: Mapping[str, Any], current: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The definition fields ``given`` as text (None: not given; ``exclude`` a list of items),
    as ScheduleAdmin takes them; ``current`` is the stored definition an update changes."""
    current = current or {}
    options = dict(current.get("options") or {})
    changes: dict[str, Any] = {}
    schedule = read_schedule(name, given, current.get("schedule"))
    if schedule is not None:
        changes["schedule"] = schedule
    for key in ("task", "overlap", "catch_up", "start", "end", "on_excluded"):
        if given.get(key) is not None:
            changes[key] = given[key]
    if given.get("exclude"):
        changes["exclude"] = list(given["exclude"] or ())
    if given.get("args") is not None:
        changes["args"] = read_json(name, "args", given["args"] or "", list)
    if given.get("kwargs") is not None:
        changes["kwargs"] = read_json(name, "kwargs", given["kwargs"] or "", dict)
    if given.get("queue") is not None:
        options["queue"] = given["queue"]
    if given.get("expires") is not None:
        options["expires"] = number(name, "expires", given["expires"] or "")
    if given.get("priority") is not None:
        options["priority"] = whole(name, "priority", given["priority"] or "", 0)
    if options != dict(current.get("options") or {}):
        changes["options"] = options
    if given.get("catch_up_window") is not None:
        changes["catch_up_window"] = number(name, "catch_up_window", given["catch_up_window"])
    if given.get("max_runs") is not None:
        changes["max_runs"] = whole(name, "max_runs", given["max_runs"] or "", 1)
    if given.get("max_lateness") is not None:
        changes["max_lateness"] = number(name, "max_lateness", given["max_lateness"] or "")
    for key in ("alert_after_failures", "pause_after_failures"):
        if given.get(key) is not None:
            changes[key] = whole(name, key, given[key] or "", 1)
    workers = given.get("workers")
    if workers is not None:
        nodes = [node.strip() for node in workers.split(",")]
        if workers != "*" and not all(nodes):
            raise FieldError(
                name, ("workers",), f"give '*' or node names apart by commas, not {workers!r}"
            )
        changes["workers"] = "*" if workers == "*" else nodes
    return changes
