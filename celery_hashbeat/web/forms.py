"""The entry form: text fields in, a ScheduleAdmin call out, and each refusal put beside the
field it is about. The checks are ScheduleAdmin's own (the same as ``hashbeat add``): this
module only reads the text (JSON lists, numbers, which schedule) and names the field."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from celery_hashbeat._logs import WEB
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.fields import FieldError, read_changes
from celery_hashbeat.control.refusals import AdminError, ConflictError, UnknownEntryError
from celery_hashbeat.expr.calendar import ON_EXCLUDED

#: The form's fields, in order, with their labels.
FIELDS = {
    "name": "Name",
    "task": "Task",
    "kind": "Schedule kind",
    "schedule": "Schedule",
    "tz": "Time zone",
    "at": "One-shot at",
    "exclude": "Days not to fire on (one a line)",
    "on_excluded": "On a day not to fire on",
    "args": "Arguments (JSON list)",
    "kwargs": "Keyword arguments (JSON object)",
    "queue": "Queue",
    "overlap": "Overlap",
    "catch_up": "Catch-up",
}

#: Examples shown under a field.
HELP = {
    "at": "In place of a schedule: an instant in ISO 8601 with its time zone, such as "
    "2026-12-01T09:00:00+01:00; it fires once, then.",
    "exclude": "Dates (2026-12-25), ranges (2026-12-24..2026-12-31), yearly dates (*-12-25), "
    "weekdays (sat,sun), holidays:US, ical:/path/to/file.ics.",
}

#: The schedule kinds, and the field of control/fields.py each one's text is.
KINDS = {
    "hashcron": "hash-cron expression",
    "hashinterval": "hashed interval (seconds)",
    "every": "plain interval (seconds)",
}
KIND_FIELDS = {"hashcron": "cron", "hashinterval": "interval", "every": "every"}

#: What ``on_excluded`` takes, as the form offers it ("": the default, skip).
ON_EXCLUDED_CHOICES = {
    "": "skip the slot (default)",
    **{mode: mode.replace("_", " ") for mode in ON_EXCLUDED if mode != "skip"},
}

#: Optional fields an edit removes when left empty.
CLEARABLE = ("overlap", "catch_up", "exclude", "on_excluded")

#: Words in a refusal that say which field it is about, checked in this order.
HINTS = (
    ("on_excluded", ("on_excluded",)),
    ("exclude", ("exclude",)),
    ("schedule", ("'schedule'", "hashcron", "hashinterval", "expression", "cron", "\n")),
    ("at", ("one-shot", "at(")),
    ("tz", ("time zone", "'tz'")),
    ("task", ("task",)),
    ("kwargs", ("'kwargs'",)),
    ("args", ("'args'",)),
    ("queue", ("'options'", "queue")),
    ("overlap", ("overlap",)),
    ("catch_up", ("catch_up", "catch-up")),
    ("name", ("name", "in the store already", "beat_schedule")),
)


@dataclass(frozen=True)
class Control:
    """One field of the form as a page draws it: a ``text`` input, a ``select`` of ``choices``
    or a ``textarea``, with what it holds, its help and its error (tied to it by id)."""

    key: str
    label: str
    widget: str
    value: str
    help: str = ""
    error: str = ""
    choices: tuple[tuple[str, str], ...] = ()

    @property
    def described_by(self) -> str:
        """The ids of the help and the error, for ``aria-describedby``."""
        ids = [f"{self.key}-help"] if self.help else []
        return " ".join([*ids, f"{self.key}-error"] if self.error else ids)


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
        data = data if isinstance(data, dict) else {}
        kind = next((k for k in KINDS if k in data), "hashcron")
        options = definition.get("options") or {}
        return cls(
            {
                "name": name,
                "task": str(definition.get("task") or ""),
                "kind": kind,
                "schedule": str(data.get(kind, "")),
                "tz": str(data.get("tz") or ""),
                "at": str(data.get("at") or ""),
                "exclude": "\n".join(str(item) for item in definition.get("exclude") or ()),
                "on_excluded": str(definition.get("on_excluded") or ""),
                "args": json.dumps(definition.get("args") or []),
                "kwargs": json.dumps(definition.get("kwargs") or {}),
                "queue": str(options.get("queue") or ""),
                "overlap": str(definition.get("overlap") or ""),
                "catch_up": str(definition.get("catch_up") or ""),
                "revision": "" if revision is None else str(revision),
            }
        )

    @classmethod
    def to_edit(cls, admin: ScheduleAdmin, name: str) -> EntryForm | None:
        """The form for editing store entry ``name``; None when there is no such entry."""
        try:
            view = admin.get(name)
        except AdminError:
            return None
        return cls.of(name, view.definition, view.revision) if view.source == "store" else None

    @classmethod
    def posted(cls, values: Mapping[str, str], editing: str | None) -> EntryForm:
        """The form as a browser sent it (an edit's name is the entry's, whatever was sent)."""
        form = cls({key: values.get(key, "") for key in (*FIELDS, "revision")})
        if editing is not None:
            form.values["name"] = editing
        return form

    def text(self, key: str) -> str:
        return self.values.get(key, "").strip()

    def controls(self, editing: str | None) -> list[Control]:
        """The fields as a page draws them (an edit keeps its name: no field for it)."""
        choices = {"kind": tuple(KINDS.items()), "on_excluded": tuple(ON_EXCLUDED_CHOICES.items())}
        return [
            Control(
                key,
                label,
                "select" if key in choices else "textarea" if key == "exclude" else "text",
                self.values.get(key, ""),
                HELP.get(key, ""),
                self.errors.get(key, ""),
                choices.get(key, ()),
            )
            for key, label in FIELDS.items()
            if not (editing and key == "name")
        ]

    def given(self) -> dict[str, Any]:
        """The fields as ``read_changes`` takes them, as ``hashbeat add`` gives its options
        (an empty field: not given)."""
        kind = self.text("kind")
        if kind not in KINDS:
            raise FieldRefusedError("kind", f"choose one of {', '.join(KINDS)}")
        keys = ("task", "at", "on_excluded", "args", "kwargs", "queue", "overlap", "catch_up")
        given: dict[str, Any] = {key: self.text(key) or None for key in keys}
        given["tz"] = (self.text("tz") or None) if kind == "hashcron" else None
        given[KIND_FIELDS[kind]] = self.text("schedule") or None
        lines = self.values.get("exclude", "").splitlines()
        given["exclude"] = [line.strip() for line in lines if line.strip()]
        if not given["task"]:
            raise FieldRefusedError("task", "give the task to send (its registered name)")
        if given[KIND_FIELDS[kind]] is None and given["at"] is None:
            raise FieldRefusedError(
                "schedule", "give the entry's schedule (or a one-shot instant in One-shot at)"
            )
        return given

    def save(self, admin: ScheduleAdmin, editing: str | None, who: str) -> bool:
        """Add the entry (or update ``editing``) through ScheduleAdmin, recorded in the audit
        trail as made for ``who``; False, with the errors beside their fields, when it was
        refused."""
        name = editing or self.text("name")
        admin = admin.on_behalf_of(who)
        try:
            given = self.given()
            if editing is None:
                changes = read_changes(name, given)
                task, schedule = changes.pop("task"), changes.pop("schedule")
                admin.add(name, task, schedule, **changes)
            else:
                current = admin.get(editing).definition
                # The form shows the whole schedule: what it leaves out goes (a time zone too).
                changes = read_changes(name, given, {**current, "schedule": None})
                for key in CLEARABLE:
                    if not given[key] and current.get(key) is not None:
                        changes[key] = None
                options = dict(current.get("options") or {})
                if not given["queue"] and options.pop("queue", None) is not None:
                    changes["options"] = options
                # The revision read with the form: a change made meanwhile is not overwritten.
                revision = self.text("revision")
                admin.update(
                    editing, revision=int(revision) if revision.isdigit() else None, **changes
                )
        except FieldRefusedError as exc:
            self.errors[exc.field] = str(exc)
            return False
        except FieldError as exc:
            self.errors[form_field(exc.fields[0])] = exc.what
            return False
        except (ConflictError, UnknownEntryError) as exc:
            self.errors[""] = str(exc)
            return False
        except AdminError as exc:
            self.errors[field_of(str(exc).replace(f"entry {name!r}", "entry"))] = str(exc)
            return False
        WEB.info("console: %s %s %s", who, "added" if editing is None else "updated", name)
        return True


def form_field(key: str) -> str:
    """The form's field for a field of control/fields.py ("" for the form as a whole)."""
    if key in KIND_FIELDS.values():
        return "schedule"
    return key if key in FIELDS else ""


def field_of(message: str) -> str:
    """The field a refusal is about, from its words; "" for the form as a whole."""
    lowered = message.lower()
    for key, words in HINTS:
        if any(word in lowered for word in words):
            return key
    return ""
