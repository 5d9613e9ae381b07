"""The operator's records kept beside an entry's definition (docs/design.md §12, §13): its pause
record, ``{"paused": true, "reason": ..., "at": <ms>, "who": ...}`` while paused and
``{"paused": false, "resumed": <ms>}`` after a resume that continues from then, and the runs
asked for now, ``{"entry": ..., "id": <task id>, "at": <ms>}``."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from celery_hashbeat.control.stored_text import instant_ms, read_json, unreadable


class Pause(NamedTuple):
    """An entry's pause record: paused (with why, since when and by whom), or resumed at
    ``resumed``."""

    paused: bool
    reason: str = ""
    at: int = 0
    resumed: int | None = None
    #: Who paused it, as the audit trail names them ("" where nobody was named: a beat's own).
    who: str = ""


class Trigger(NamedTuple):
    """One run asked for now: the entry, the task id it gets, when it was asked (ms), and
    whether the operator forced it past the entry's overlap guard (docs/design.md §12)."""

    entry: str
    id: str
    at: int
    force: bool = False


def encode_pause(pause: Pause) -> str:
    if pause.paused:
        data: dict[str, Any] = {"paused": True, "reason": pause.reason, "at": pause.at}
        if pause.who:  # as a release that did not name who wrote it
            data["who"] = pause.who
        return json.dumps(data)
    return json.dumps({"paused": False, "resumed": pause.resumed})


def decode_pause(name: str, text: str) -> Pause:
    """A stored pause record; like ``decode``, failing only as a DefinitionError."""
    with unreadable(f"entry {name!r}: the stored pause record"):
        data = read_json(f"entry {name!r}: the stored pause record", text)
        if data["paused"] is True:
            reason, who = str(data.get("reason") or ""), str(data.get("who") or "")
            return Pause(True, reason, instant_ms(data.get("at") or 0, "'at'"), who=who)
        return Pause(False, resumed=instant_ms(data["resumed"], "'resumed'"))


def encode_trigger(trigger: Trigger) -> str:
    data: dict[str, Any] = trigger._asdict()
    if not trigger.force:
        del data["force"]  # as a release without forced triggers wrote it
    return json.dumps(data)


def decode_trigger(text: str) -> Trigger:
    """A stored trigger; like ``decode``, failing only as a DefinitionError."""
    with unreadable(f"a stored trigger {text[:80]!r}"):
        data = read_json("a stored trigger", text)
        force = data.get("force", False)
        return Trigger(
            str(data["entry"]), str(data["id"]), instant_ms(data["at"], "'at'"), force is True
        )
