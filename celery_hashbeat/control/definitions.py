"""Entries kept in the store, as JSON (docs/design.md §13): the definition, never a pickle.

Only JSON is ever read back, and a task name and its options are data: nothing read from the
store is imported or called. A definition is the ``beat_schedule`` dict users already write
(``task``, ``schedule``, ``args``, ``kwargs``, ``options``, ``catch_up``, ``catch_up_window``,
``overlap``, ``workers``) plus the bounds ``start``, ``end`` and ``max_runs``; its schedule is
kept as data (control/schedule_data.py), and the entry keys ``exclude`` and ``on_excluded``
apply to any schedule (§20). The pause record and triggers beside it are in
control/pause_and_trigger.py; reading stored text safely in control/stored_text.py.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, NamedTuple

from celery_hashbeat.control.schedule_data import schedule_data, schedule_object
from celery_hashbeat.control.stored_text import (
    MS_MAX,
    DefinitionError,
    read_json,
    typed,
    unreadable,
)
from celery_hashbeat.entries.building import KNOWN_KEYS

#: The definition's keys a stored entry may hold ("relative" is a Celery schedule object's
#: setting, and none is stored); "schedule" and "task" it must.
STORED_KEYS = tuple(sorted(KNOWN_KEYS - {"relative"}))

#: The publish options a stored entry may carry, and the JSON types each takes.
OPTION_TYPES: dict[str, tuple[type, ...]] = {
    "queue": (str,),
    "exchange": (str,),
    "routing_key": (str,),
    "priority": (int,),
    "expires": (int, float),
    "headers": (dict,),
    "serializer": (str,),
    "compression": (str,),
    "time_limit": (int, float),
    "soft_time_limit": (int, float),
    "ignore_result": (bool,),
    "shadow": (str,),
}

#: The longest entry name kept in the store.
NAME_MAX = 200


def check_name(name: object) -> str:
    """A name a stored entry may have."""
    if not isinstance(name, str) or not name or name != name.strip():
        raise DefinitionError(
            f"entry name {name!r}: give a non-empty name without leading or trailing spaces"
        )
    if len(name) > NAME_MAX or not name.isprintable():
        raise DefinitionError(
            f"entry name {name[:40]!r}...: use at most {NAME_MAX} printable characters"
        )
    if "@" in name:
        raise DefinitionError(
            f"entry name {name!r}: '@' is kept for the per-worker copies of an entry "
            f"('<entry>@<worker>'); choose a name without it"
        )
    return name


class Stored(NamedTuple):
    """A stored entry read back: its definition, when it was added or last updated (ms), and
    its revision (1 when added, one more per update; 0 for one stored before revisions)."""

    definition: dict[str, Any]
    changed: int
    revision: int = 0


def encode(name: str, definition: dict[str, Any], changed: int = 0, revision: int = 0) -> str:
    """A definition (schedule object inside) as the JSON text the store keeps, stamped with
    when it changed, so that no beat ever catches up slots from before then, and with its
    revision, so that two updates of one revision cannot both land (docs/design.md §13)."""
    unknown = set(definition) - set(STORED_KEYS)
    if unknown:
        raise DefinitionError(
            f"entry {name!r}: unknown keys {sorted(unknown)}; known: {list(STORED_KEYS)}"
        )
    data = {key: value for key, value in definition.items() if value is not None}
    data["schedule"] = schedule_data(name, definition.get("schedule"))
    for key in ("start", "end"):
        if isinstance(data.get(key), datetime):
            data[key] = data[key].isoformat()
    if "args" in data:
        if not isinstance(data["args"], list | tuple):
            raise DefinitionError(
                f"entry {name!r}: 'args' must be a list of positional arguments, not "
                f"{data['args']!r}"
            )
        data["args"] = list(data["args"])
    kwargs = data.get("kwargs")
    if kwargs is not None and (
        not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs)
    ):
        raise DefinitionError(
            f"entry {name!r}: 'kwargs' must map keyword names (text) to values, not {kwargs!r}"
        )
    data["changed"] = changed
    if revision:
        data["revision"] = revision
    try:
        text = json.dumps(data, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:  # nested past what JSON can write
        raise DefinitionError(
            f"entry {name!r}: args, kwargs and options must be plain JSON (strings, numbers, "
            f"true/false, null, lists and objects): {exc}"
        ) from None
    read_json(f"entry {name!r}: the definition", text)  # what the beats would refuse to read
    return text


def decode(name: str, text: str) -> Stored:
    """Stored JSON text as a beat_schedule definition, checked field by field.

    Whatever the text holds (any nesting, size or types), the only error is one DefinitionError
    naming the entry, so a reader can skip that entry and go on with the others."""
    with unreadable(f"entry {name!r}: the stored definition"):
        return _decode(name, text)


def _decode(name: str, text: str) -> Stored:
    data = read_json(f"entry {name!r}: the stored definition", text)
    if not isinstance(data, dict):
        raise DefinitionError(f"entry {name!r}: the stored definition is not a JSON object")
    changed = data.pop("changed", 0)
    revision = data.pop("revision", 0)
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
        raise DefinitionError(f"entry {name!r}: 'revision' must be a count, not {revision!r}")
    unknown = set(data) - set(STORED_KEYS)
    if unknown:
        raise DefinitionError(
            f"entry {name!r}: unknown keys {sorted(unknown)}; known: {list(STORED_KEYS)}"
        )
    if isinstance(changed, bool) or not isinstance(changed, int) or not 0 <= changed <= MS_MAX:
        raise DefinitionError(f"entry {name!r}: 'changed' must be epoch ms, not {changed!r}")
    if "task" not in data or "schedule" not in data:
        raise DefinitionError(f"entry {name!r}: a stored entry needs 'task' and 'schedule'")
    if not isinstance(data["task"], str) or not data["task"]:
        raise DefinitionError(f"entry {name!r}: 'task' must be a task name, not {data['task']!r}")
    definition = dict(data)
    definition["schedule"] = schedule_object(name, data["schedule"])
    definition["args"] = tuple(typed(data.get("args", []), list, f"entry {name!r}: 'args'"))
    kwargs = typed(data.get("kwargs", {}), dict, f"entry {name!r}: 'kwargs'")
    definition["kwargs"] = kwargs
    definition["options"] = check_options(name, data.get("options", {}))
    workers = data.get("workers")
    if (
        workers is not None
        and workers != "*"
        and not (
            isinstance(workers, list) and all(isinstance(node, str) and node for node in workers)
        )
    ):
        raise DefinitionError(
            f"entry {name!r}: 'workers' must be \"*\" or a list of worker node names, "
            f"not {workers!r}"
        )
    return Stored(definition, changed, revision)


def check_options(name: str, options: Any) -> dict[str, Any]:
    """Publish options a stored entry may carry, each of its JSON type."""
    options = typed(options, dict, f"entry {name!r}: 'options'")
    for key, value in options.items():
        types = OPTION_TYPES.get(key)
        if types is None:
            raise DefinitionError(
                f"entry {name!r}: unknown option {key!r}; a stored entry may set "
                f"{', '.join(OPTION_TYPES)}"
            )
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            kinds = " or ".join(kind.__name__ for kind in types)
            raise DefinitionError(f"entry {name!r}: option {key!r} must be {kinds}, not {value!r}")
    return dict(options)
