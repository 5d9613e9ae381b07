"""Schedules as stored data (docs/design.md §13, §20, §21), never pickles: each schedule object
an entry may keep in the store, and the JSON it is kept as.

- ``{"hashcron": "H 6 * * *", "tz": "Europe/Riga", "day_and": false, "balanced": null}``
- ``{"hashinterval": 3600}`` (seconds), ``{"every": 60}`` (seconds, a plain interval)
- ``{"crontab": {"minute": "0", "hour": "*/2", ...}}`` (Celery's crontab, its five fields)
- ``{"solar": {"event": "sunrise", "lat": 56.95, "lon": 24.1}}``
- ``{"at": "2026-12-01T09:00:00+01:00"}`` (a one-shot, docs/design.md §21)

A hashcron or hashinterval may carry ``"exclude": [...]`` and ``"on_excluded"`` (§20).
"""

from __future__ import annotations

from datetime import timedelta, tzinfo
from typing import Any, cast

from celery.schedules import crontab, schedule, solar

from celery_hashbeat.control.stored_text import DefinitionError, typed
from celery_hashbeat.schedules import at, hashcron, hashinterval

CRONTAB_FIELDS = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")


#: The calendar keys a stored hashcron or hashinterval may carry (docs/design.md §20).
CALENDAR = ("exclude", "on_excluded")


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
                typed(data["hashcron"], str, f"{where} 'hashcron'"),
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
            return at(typed(data["at"], str, f"{where} 'at'"))
        if "every" in data:
            _only(data, {"every"}, where)
            return timedelta(seconds=_seconds(data["every"], where))
        if "crontab" in data:
            fields = typed(data["crontab"], dict, f"{where} 'crontab'")
            _only(fields, set(CRONTAB_FIELDS), f"{where} 'crontab'")
            return crontab(**{key: str(value) for key, value in fields.items()})
        fields = typed(data["solar"], dict, f"{where} 'solar'")
        _only(fields, {"event", "lat", "lon"}, f"{where} 'solar'")
        return solar(fields.get("event"), fields.get("lat"), fields.get("lon"))
    except DefinitionError:
        raise
    except Exception as exc:
        raise DefinitionError(f"{where}: {exc}") from exc


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
