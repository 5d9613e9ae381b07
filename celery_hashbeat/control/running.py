"""What a beat runs, written down for ``hashbeat plan`` (docs/design.md §19).

Each beat records in the store, under the schedule digest its heartbeat carries, the
configuration's definitions it runs (beat_schedule and Celery's own entries), as data: each the
JSON text a stored entry would be (control/definitions.py), so that the plan rebuilds them
through the same catalog as the candidate. A definition that cannot be written as data (a custom
schedule class) is kept as its ``repr``: the plan can say it is there and whether its text
changed, not its slots.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.control.definitions import decode, encode
from celery_hashbeat.control.stored_text import DefinitionError
from celery_hashbeat.entries.building import as_definition

logger = SCHEDULER

#: The version of the recorded form.
FORM = 1

#: The most definitions a beat records: a larger configuration is not recorded (its JSON would
#: be megabytes written at every start), and ``hashbeat plan`` says so.
RECORD_AT_MOST = 10_000


class Opaque(str):
    """A recorded definition that could not be written as data: its ``repr``."""


def described(configured: Mapping[str, Any]) -> str:
    """``configured`` (name -> beat_schedule value) as the text a beat records."""
    entries: dict[str, Any] = {}
    for name in sorted(configured):
        entries[name] = as_data(name, configured[name])
    return json.dumps({"form": FORM, "entries": entries}, sort_keys=True)


def recorded(configured: Mapping[str, Any]) -> str | None:
    """What a beat records (``described``), or None past RECORD_AT_MOST definitions."""
    if len(configured) > RECORD_AT_MOST:
        logger.info(
            "beat: %d entries in the configuration, more than %d: the schedule is not recorded "
            "for hashbeat plan",
            len(configured),
            RECORD_AT_MOST,
        )
        return None
    return described(configured)


def as_data(name: str, given: Any) -> dict[str, Any]:
    """One definition as data: ``{"definition": ...}``, or ``{"opaque": repr}``."""
    mapping = as_definition(given)
    if mapping is not None:
        definition = {k: v for k, v in mapping.items() if k != "relative" and v is not None}
        try:
            data = json.loads(encode(name, definition))
        except (DefinitionError, TypeError, ValueError):
            return {"opaque": repr(given)}
        # One form for one definition: no stamp, no empty arguments or options (a decoded
        # definition has them, the one written in beat_schedule often not).
        del data["changed"]
        return {"definition": {k: v for k, v in data.items() if v not in ([], {})}}
    return {"opaque": repr(given)}


def read(text: str) -> dict[str, Any]:
    """A recorded schedule's definitions, by name: each one a catalog builds, or an Opaque;
    empty for a record that does not read back."""
    try:
        data = json.loads(text)
        entries = data["entries"] if data.get("form") == FORM else {}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}
    definitions: dict[str, Any] = {}
    for name, recorded in entries.items():
        if "definition" in recorded:
            try:
                definitions[name] = decode(name, json.dumps(recorded["definition"])).definition
                continue
            except DefinitionError:
                pass
        definitions[name] = Opaque(recorded.get("opaque") or json.dumps(recorded))
    return definitions
