"""The entry form: text fields in, a ScheduleAdmin call out, and each refusal put beside the
field it is about. The checks are ScheduleAdmin's own (the same as ``hashbeat add``): this
module only reads the text (JSON lists, numbers, which schedule) and names the field."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from celery_hashbeat.control.admin import (
    AdminError,
    ConflictError,
    ScheduleAdmin,
    UnknownEntryError,
)
from celery_hashbeat.control.definitions import DefinitionError, schedule_object

#: The form's fields, in order, with their labels.
FIELDS = {
    "name": "Name",
    "task": "Task",
    "kind": "Schedule kind",
    "schedule": "Schedule",
    "tz": "Time zone",
    "args": "Arguments (JSON list)",
    "kwargs": "Keyword arguments (JSON object)",
    "queue": "Queue",
    "overlap": "Overlap",
    "catch_up": "Catch-up",
}

KINDS = {
    "hashcron": "hash-cron expression",
    "hashinterval": "hashed interval (seconds)",
    "every": "plain interval (seconds)",
}

#: Words in a refusal that say which field it is about, checked in this order.
HINTS = (
    ("schedule", ("'schedule'", "hashcron", "hashinterval", "expression", "cron", "\n")),
    ("tz", ("time zone", "'tz'")),
    ("task", ("task",)),
    ("kwargs", ("'kwargs'",)),
    ("args", ("'args'",)),
    ("queue", ("'options'", "queue")),
    ("overlap", ("overlap",)),
    ("catch_up", ("catch_up", "catch-up")),
    ("name", ("name", "in the store already", "beat_schedule")),
)


class FieldRefusedError(AdminError):
    """A field's text could not be read; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class EntryForm:
    """The form's values (text, as typed) and its errors by field ("" for the whole form)."""

    values: dict[str, str]
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def blank(cls) -> EntryForm:
        return cls({"kind": "hashcron", "args": "[]", "kwargs": "{}"})

    @classmethod
    def of(cls, name: str, definition: dict[str, Any], revision: int | None) -> EntryForm:
        """A stored definition as the form shows it, for an edit."""
        data = definition.get("schedule") or {}
        kind = next((k for k in KINDS if isinstance(data, dict) and k in data), "hashcron")
        options = definition.get("options") or {}
        return cls(
            {
                "name": name,
                "task": str(definition.get("task") or ""),
                "kind": kind,
                "schedule": str(data.get(kind, "")) if isinstance(data, dict) else "",
                "tz": str(data.get("tz") or "") if isinstance(data, dict) else "",
                "args": json.dumps(definition.get("args") or []),
                "kwargs": json.dumps(definition.get("kwargs") or {}),
                "queue": str(options.get("queue") or ""),
                "overlap": str(definition.get("overlap") or ""),
                "catch_up": str(definition.get("catch_up") or ""),
                "revision": "" if revision is None else str(revision),
            }
        )

    def text(self, key: str) -> str:
        return self.values.get(key, "").strip()

    def definition(self) -> dict[str, Any]:
        """The fields as ScheduleAdmin's keyword arguments (name apart); FieldRefusedError if one
        cannot be read."""
        name = self.text("name")
        kind = self.text("kind")
        if kind not in KINDS:
            raise FieldRefusedError("kind", f"choose one of {', '.join(KINDS)}")
        written = self.text("schedule")
        if not written:
            raise FieldRefusedError("schedule", "give the entry's schedule")
        data: dict[str, Any] = {kind: written}
        if kind == "hashcron":
            if self.text("tz"):
                data["tz"] = self.text("tz")
        else:
            try:
                data[kind] = float(written)
            except ValueError:
                why = f"{written!r} is not a number of seconds"
                raise FieldRefusedError("schedule", why) from None
        try:
            schedule = schedule_object(name or "new", data)
        except DefinitionError as exc:
            raise FieldRefusedError("schedule", str(exc)) from None
        result: dict[str, Any] = {
            "task": self.text("task"),
            "schedule": schedule,
            "args": _json(self.text("args") or "[]", list, "args"),
            "kwargs": _json(self.text("kwargs") or "{}", dict, "kwargs"),
            "options": {"queue": self.text("queue")} if self.text("queue") else {},
            "overlap": self.text("overlap") or None,
            "catch_up": self.text("catch_up") or None,
        }
        if not result["task"]:
            raise FieldRefusedError("task", "give the task to send (its registered name)")
        return result

    def save(self, admin: ScheduleAdmin, editing: str | None) -> bool:
        """Add the entry (or update ``editing``) through ScheduleAdmin; False, with the errors
        beside their fields, when it was refused."""
        try:
            definition = self.definition()
            if editing is None:
                task, schedule = definition.pop("task"), definition.pop("schedule")
                extra = {k: v for k, v in definition.items() if v is not None}
                admin.add(self.text("name"), task, schedule, **extra)
            else:
                # The revision read with the form: a change made meanwhile is not overwritten.
                revision = self.text("revision")
                admin.update(
                    editing, revision=int(revision) if revision.isdigit() else None, **definition
                )
        except FieldRefusedError as exc:
            self.errors[exc.field] = str(exc)
            return False
        except (ConflictError, UnknownEntryError) as exc:
            self.errors[""] = str(exc)
            return False
        except AdminError as exc:
            name = editing or self.text("name")
            self.errors[field_of(str(exc).replace(f"entry {name!r}", "entry"))] = str(exc)
            return False
        return True


def _json(text: str, kind: type, key: str) -> Any:
    example = '[42, "eu"]' if kind is list else '{"full": true}'
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise FieldRefusedError(
            key, f"not JSON ({exc}); give a JSON {kind.__name__}: {example}"
        ) from None
    if not isinstance(value, kind):
        what = "list" if kind is list else "object"
        raise FieldRefusedError(key, f"give a JSON {what}: {example}")
    return value


def field_of(message: str) -> str:
    """The field a refusal is about, from its words; "" for the form as a whole."""
    lowered = message.lower()
    for key, words in HINTS:
        if any(word in lowered for word in words):
            return key
    return ""
