"""Entries kept in the store, as JSON (docs/design.md §13): schedules as data, never pickles.

Only JSON is ever read back, and a task name and its options are data: nothing read from the
store is imported or called. A definition is the ``beat_schedule`` dict users already write
(``task``, ``schedule``, ``args``, ``kwargs``, ``options``, ``catch_up``, ``catch_up_window``,
``overlap``, ``workers``) plus the bounds ``start``, ``end`` and ``max_runs``; its schedule is
one of

- ``{"hashcron": "H 6 * * *", "tz": "Europe/Riga", "day_and": false, "balanced": null}``
- ``{"hashinterval": 3600}`` (seconds), ``{"every": 60}`` (seconds, a plain interval)
- ``{"crontab": {"minute": "0", "hour": "*/2", ...}}`` (Celery's crontab, its five fields)
- ``{"solar": {"event": "sunrise", "lat": 56.95, "lon": 24.1}}``
- ``{"at": "2026-12-01T09:00:00+01:00"}`` (a one-shot, docs/design.md §21)

A hashcron or hashinterval may carry ``"exclude": [...]`` and ``"on_excluded"`` (§20); the entry
keys of the same names apply to any schedule.

The pause record of an entry is ``{"paused": true, "reason": ..., "at": <ms>}`` while paused and
``{"paused": false, "resumed": <ms>}`` after a resume that continues from then; a trigger is
``{"entry": ..., "id": <task id>, "at": <ms>}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, tzinfo
from typing import Any, NamedTuple, cast

from celery.schedules import crontab, schedule, solar

from celery_hashbeat.entries.building import KNOWN_KEYS
from celery_hashbeat.errors import HashbeatError
from celery_hashbeat.schedules import at, hashcron, hashinterval

CRONTAB_FIELDS = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")

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

#: The longest stored value read back or written, in characters: a definition is a schedule and a
#: few arguments, and a value past this is refused rather than parsed and published every slot.
TEXT_MAX = 1_000_000

#: How deep a stored value's JSON may nest: enough for any real arguments, and far from the
#: recursion limits of the JSON parser, of kombu's serialisers and of the beat's own code.
DEPTH_MAX = 32

#: The latest instant a stored record may name (9999-12-31T23:59:59.999Z, in epoch ms): beyond
#: it no date can be made of it.
MS_MAX = 253_402_300_799_999

#: The longest message an unreadable stored value gets: it names the entry and the fault, and does
#: not echo a value that may be megabytes long.
MESSAGE_MAX = 400


class DefinitionError(ValueError, HashbeatError):
    """A definition that cannot be stored or read back; the message names the entry, the
    field and what to do."""


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


def schedule_data(name: str, given: Any) -> dict[str, Any]:
    """A schedule object (or seconds, or a timedelta) as stored JSON data."""
    if isinstance(given, hashcron):
        data: dict[str, Any] = {"hashcron": given.expr}
        if given.zone is not None:
            data["tz"] = _zone_name(name, given.zone)
        if given.day_and:
            data["day_and"] = True
        if given.balanced is not None:
            data["balanced"] = given.balanced
        if given.key is not None:
            data["key"] = _key(name, given.key)
        return _with_calendar(data, given)
    if isinstance(given, hashinterval):
        data = {"hashinterval": given.every.total_seconds()}
        if given.key is not None:
            data["key"] = _key(name, given.key)
        return _with_calendar(data, given)
    if isinstance(given, at):
        return {"at": given.when.isoformat()}
    if isinstance(given, int | float) and not isinstance(given, bool):
        return {"every": float(given)}
    if isinstance(given, timedelta):
        return {"every": given.total_seconds()}
    if type(given) is schedule and not given.relative:
        return {"every": cast(timedelta, given.run_every).total_seconds()}  # type: ignore[attr-defined]
    if type(given) is crontab:
        return {
            "crontab": {field: str(getattr(given, f"_orig_{field}")) for field in CRONTAB_FIELDS}
        }
    if type(given) is solar:
        return {"solar": {"event": given.event, "lat": given.lat, "lon": given.lon}}
    raise DefinitionError(
        f"entry {name!r}: a {type(given).__name__} schedule cannot be kept in the store; use "
        f"hashcron, hashinterval, seconds or a timedelta, crontab or solar (or keep the entry "
        f"in beat_schedule)"
    )


def schedule_object(name: str, data: Any) -> Any:
    """Stored schedule data as the schedule object it stands for."""
    where = f"entry {name!r}: 'schedule'"
    if (
        not isinstance(data, dict)
        or len({"hashcron", "hashinterval", "every", "crontab", "solar", "at"} & set(data)) != 1
    ):
        raise DefinitionError(
            f"{where} must be one of {{'hashcron': EXPR}}, {{'hashinterval': SECONDS}}, "
            f"{{'every': SECONDS}}, {{'crontab': {{...}}}}, {{'solar': {{...}}}} or "
            f"{{'at': ISO}}, not {data!r}"
        )
    try:
        if "hashcron" in data:
            _only(data, {"hashcron", "tz", "day_and", "balanced", "key", *CALENDAR}, where)
            return hashcron(
                _typed(data["hashcron"], str, f"{where} 'hashcron'"),
                key=data.get("key"),
                tz=data.get("tz"),
                day_and=bool(data.get("day_and", False)),
                balanced=data.get("balanced"),
                **_calendar(data, where),
            )
        if "hashinterval" in data:
            _only(data, {"hashinterval", "key", *CALENDAR}, where)
            return hashinterval(
                _seconds(data["hashinterval"], where),
                key=data.get("key"),
                **_calendar(data, where),
            )
        if "at" in data:
            _only(data, {"at"}, where)
            return at(_typed(data["at"], str, f"{where} 'at'"))
        if "every" in data:
            _only(data, {"every"}, where)
            return timedelta(seconds=_seconds(data["every"], where))
        if "crontab" in data:
            fields = _typed(data["crontab"], dict, f"{where} 'crontab'")
            _only(fields, set(CRONTAB_FIELDS), f"{where} 'crontab'")
            return crontab(**{key: str(value) for key, value in fields.items()})
        fields = _typed(data["solar"], dict, f"{where} 'solar'")
        _only(fields, {"event", "lat", "lon"}, f"{where} 'solar'")
        return solar(fields.get("event"), fields.get("lat"), fields.get("lon"))
    except DefinitionError:
        raise
    except Exception as exc:
        raise DefinitionError(f"{where}: {exc}") from exc


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
    with _unreadable(f"entry {name!r}: the stored definition"):
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
    definition["args"] = tuple(_typed(data.get("args", []), list, f"entry {name!r}: 'args'"))
    kwargs = _typed(data.get("kwargs", {}), dict, f"entry {name!r}: 'kwargs'")
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
    options = _typed(options, dict, f"entry {name!r}: 'options'")
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


def encode_pause(pause: Pause) -> str:
    if pause.paused:
        data: dict[str, Any] = {"paused": True, "reason": pause.reason, "at": pause.at}
        if pause.who:  # as a release that did not name who wrote it
            data["who"] = pause.who
        return json.dumps(data)
    return json.dumps({"paused": False, "resumed": pause.resumed})


def decode_pause(name: str, text: str) -> Pause:
    """A stored pause record; like ``decode``, failing only as a DefinitionError."""
    with _unreadable(f"entry {name!r}: the stored pause record"):
        data = read_json(f"entry {name!r}: the stored pause record", text)
        if data["paused"] is True:
            reason, who = str(data.get("reason") or ""), str(data.get("who") or "")
            return Pause(True, reason, _ms(data.get("at") or 0, "'at'"), who=who)
        return Pause(False, resumed=_ms(data["resumed"], "'resumed'"))


def encode_trigger(trigger: Trigger) -> str:
    data: dict[str, Any] = trigger._asdict()
    if not trigger.force:
        del data["force"]  # as a release without forced triggers wrote it
    return json.dumps(data)


def decode_trigger(text: str) -> Trigger:
    """A stored trigger; like ``decode``, failing only as a DefinitionError."""
    with _unreadable(f"a stored trigger {text[:80]!r}"):
        data = read_json("a stored trigger", text)
        force = data.get("force", False)
        return Trigger(str(data["entry"]), str(data["id"]), _ms(data["at"], "'at'"), force is True)


def read_json(where: str, text: object) -> Any:
    """Stored text as JSON, refused (as a DefinitionError saying ``where``) when it is not text,
    is longer than TEXT_MAX, does not parse or nests deeper than DEPTH_MAX."""
    if not isinstance(text, str):
        raise DefinitionError(f"{where} is not text")
    if len(text) > TEXT_MAX:
        raise DefinitionError(f"{where} is {len(text):,} characters long; at most {TEXT_MAX:,}")
    try:
        data = json.loads(text)
    except RecursionError:
        raise DefinitionError(f"{where} nests deeper than {DEPTH_MAX} levels") from None
    except ValueError as exc:
        raise DefinitionError(f"{where} is not JSON ({exc})") from None
    if _depth(data) > DEPTH_MAX:
        raise DefinitionError(f"{where} nests deeper than {DEPTH_MAX} levels")
    return data


def _depth(data: Any) -> int:
    """How deep ``data`` nests (a scalar is 0), counted without recursion."""
    deepest, stack = 0, [(data, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            depth += 1
            if depth > DEPTH_MAX:
                return depth
            deepest = max(deepest, depth)
            stack.extend(
                (item, depth) for item in (value.values() if isinstance(value, dict) else value)
            )
    return deepest


@contextmanager
def _unreadable(where: str) -> Iterator[None]:
    """Whatever goes wrong reading a stored value leaves as one DefinitionError saying
    ``where``, with a message of at most MESSAGE_MAX characters."""
    try:
        yield
    except DefinitionError as exc:
        raise DefinitionError(_cut(str(exc))) from None
    except Exception as exc:  # any content at all: a reader skips this value and goes on
        raise DefinitionError(
            _cut(f"{where} cannot be read ({type(exc).__name__}: {exc})")
        ) from None


def _cut(message: str) -> str:
    if len(message) <= MESSAGE_MAX:
        return message
    return message[: MESSAGE_MAX - 5] + " ...)"


def _ms(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MS_MAX:
        raise ValueError(f"{where} must be an instant in epoch ms, not {value!r}")
    return int(value)


#: The calendar keys a stored hashcron or hashinterval may carry (docs/design.md §20).
CALENDAR = ("exclude", "on_excluded")


def _with_calendar(data: dict[str, Any], given: hashcron | hashinterval) -> dict[str, Any]:
    if given.exclude:
        data["exclude"] = list(given.exclude)
        if given.on_excluded is not None:
            data["on_excluded"] = given.on_excluded
    return data


def _calendar(data: dict[str, Any], where: str) -> dict[str, Any]:
    exclude = data.get("exclude")
    if exclude is None:
        return {}
    if not isinstance(exclude, list) or not all(isinstance(item, str) for item in exclude):
        raise DefinitionError(f"{where} 'exclude' must be a JSON list of strings, not {exclude!r}")
    return {"exclude": exclude, "on_excluded": data.get("on_excluded")}


def _only(data: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = set(data) - allowed
    if unknown:
        raise DefinitionError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(allowed)}")


def _typed(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind):
        raise DefinitionError(f"{where} must be a JSON {_json_kind(kind)}, not {value!r}")
    return value


def _json_kind(kind: type) -> str:
    names: dict[type, str] = {str: "string", list: "list", dict: "object"}
    return names.get(kind, kind.__name__)


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise DefinitionError(
            f"{where}: the period must be a number of seconds above 0, not {value!r}"
        )
    return float(value)


def _zone_name(name: str, zone: str | tzinfo) -> str:
    text = zone if isinstance(zone, str) else str(getattr(zone, "key", zone))
    if "/" not in text and text not in ("UTC", "GMT"):
        raise DefinitionError(
            f"entry {name!r}: the time zone {zone!r} has no IANA name to store; give it by name "
            f"(tz='Europe/Riga')"
        )
    return text


def _key(name: str, key: Any) -> Any:
    if not isinstance(key, str | int) or isinstance(key, bool):
        raise DefinitionError(f"entry {name!r}: a stored hash key must be text or a whole number")
    return key
