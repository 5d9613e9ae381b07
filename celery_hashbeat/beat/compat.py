"""Where the scheduler behaves as ``celery.beat`` does for code and tools that look at it.

- ``Scheduler.schedule`` is a live mapping (``LiveSchedule``): an entry written into it, or
  deleted from it, is in or out of the schedule at once, and an entry whose ``schedule`` is
  replaced in place is replanned at the next tick (``apply_changes``);
- ``last_run_at`` and ``total_run_count`` come from the store when a beat starts to lead, or
  first stands by (``leadership.read_run_counts``), so restarts and failovers keep them;
- the "Sending due task" line comes from Celery's ``celery.beat`` logger (``BEAT_LOGGER``), so the
  usual way of silencing it works; the scheduler's own lines keep its own logger;
- the places where the design deliberately differs are said once at start (``warn_differences``),
  and so are beat settings that do nothing here (``warn_inert_settings``); docs/migration.md
  lists them all.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

from celery_hashbeat._logs import BEAT, COMPAT
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.entries.errors import EntryError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from celery.beat import ScheduleEntry

    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.settings import Settings

#: Celery's beat logger: the send lines are logged there, as Celery's own scheduler logs them.
BEAT_LOGGER = BEAT

logger = COMPAT

#: How many entry names a start-up warning lists before it says "and N more".
NAMES_SHOWN = 5


class LiveSchedule(MutableMapping[str, "ScheduleEntry"]):
    """``Scheduler.schedule``: the scheduler's entries by name, as Celery's mapping is. Writing a
    definition (a dict or a ScheduleEntry) adds or replaces an entry, as ``beat_schedule`` would;
    deleting takes one out."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def __getitem__(self, name: str) -> ScheduleEntry:
        return self._catalog.entries[name]

    def __setitem__(self, name: str, value: Any) -> None:
        current = self._catalog.entries.get(name)
        if current is value:
            return
        self._catalog.update({name: value})

    def __delitem__(self, name: str) -> None:
        if name not in self._catalog.entries:
            raise KeyError(name)
        self._catalog.deactivate([name])

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._catalog.entries))

    def __len__(self) -> int:
        return len(self._catalog.entries)

    def __repr__(self) -> str:
        return f"<LiveSchedule of {len(self)} entries>"


#: ScheduleEntry's keywords that say what an entry reports, not what it is (``add_entry``).
REPORTED_KEYWORDS = ("last_run_at", "total_run_count")


def add_entry(catalog: Catalog, now_ms: int, keywords: dict[str, Any]) -> Entry:
    """``Scheduler.add``: an entry from ScheduleEntry's keywords (``name``, ``task``,
    ``schedule``, ``args``, ``kwargs``, ``options``, ``relative``, ``app``, ``last_run_at``,
    ``total_run_count``) and the keys of a beat_schedule entry. ``last_run_at`` and
    ``total_run_count`` are what the entry reports until it is first sent; when that is comes
    from its schedule, counted from when it was added (docs/migration.md)."""
    name = keywords.pop("name")
    keywords.pop("app", None)
    reported = {key: keywords.pop(key) for key in REPORTED_KEYWORDS if key in keywords}
    # Refused with the reason, as the beat would log it, before anything changes.
    Catalog.trial(catalog.app, catalog.settings, now_ms, name, keywords)
    catalog.update({name: keywords})
    if name in catalog.broken:
        raise EntryError(f"entry {name!r} cannot run; see the log")
    entry = catalog.entries[name]
    for key, value in reported.items():
        setattr(entry, key, value)
    return entry


def apply_changes(catalog: Catalog, changed: list[Entry]) -> None:
    """Replan the entries whose ``schedule`` was replaced in place (``entry.schedule = ...``):
    each is rebuilt from its own fields, so its slots follow the new schedule from now on.
    Copies of entries (``copy.copy``, ``next(entry)``) are detached and ignored."""
    pending = list(changed)
    changed.clear()
    current = {entry.name: entry for entry in pending if catalog.entries.get(entry.name) is entry}
    for entry in current.values():
        entry.active = False
        del catalog.entries[entry.name]
    if current:
        catalog.update(current)
    for name, old in current.items():
        new = catalog.entries.get(name)
        if new is not None:  # the same entry to anyone looking: it keeps its history
            new.last_slot, new.total_run_count = old.last_slot, old.total_run_count


def warn_differences(entries: Iterable[Entry], settings: Settings) -> None:
    """Say once, at start, where this schedule meets a deliberate difference from Celery's
    scheduler (docs/migration.md, "Compatibility with celery.beat")."""
    asking = sorted(entry.name for entry in entries if entry.source.asks_is_due)
    if asking:
        logger.warning(
            "beat: %s is_due; celery_hashbeat asks it at each slot of the schedule and skips "
            "the slot when it says not due, but does not use the 'next' it returns (Celery "
            "asks again that much later): see 'Compatibility with celery.beat' in "
            "docs/migration.md",
            names(asking, "the schedule of entry", "the schedules of entries")
            + (" overrides" if len(asking) == 1 else " override"),
        )
    window, deadline = settings.catch_up_window, settings.cron_deadline
    if window is not None and deadline is not None and window != deadline:
        logger.warning(
            "beat: beat_cron_starting_deadline (%gs) and hashbeat_catch_up_window (%gs) are both "
            "set; crontab entries use the tighter, %gs, and other entries %gs (an entry's own "
            "catch_up_window overrides both): set one of them only to avoid the doubt",
            deadline,
            window,
            min(window, deadline),
            window,
        )


#: Celery's beat settings that do nothing with this scheduler: their defaults, and why.
INERT_SETTINGS = {
    "beat_sync_every": (
        0,
        "there is nothing to sync, each send is written to the store as it is claimed",
    ),
}


def warn_inert_settings(conf: Mapping[str, Any]) -> None:
    """Say once, at start, of each beat setting given that this scheduler does not use."""
    for name, (default, why) in INERT_SETTINGS.items():
        value = conf.get(name, default)
        if value != default:
            logger.warning(
                "beat: %s=%r has no effect with celery_hashbeat: %s; it can be left out",
                name,
                value,
                why,
            )


def names(found: list[str], one: str, many: str) -> str:
    """``found`` as a phrase: 'the schedule of entry 'a'', or a few names and how many more."""
    shown = ", ".join(repr(name) for name in found[:NAMES_SHOWN])
    more = len(found) - NAMES_SHOWN
    if more > 0:
        shown += f" and {more} more"
    return f"{one if len(found) == 1 else many} {shown}"
