"""One slot source, schedule object and fingerprint per distinct schedule, shared among entries.

A hundred thousand entries name a few hundred distinct schedules: SharedSlots builds each once and
hands it to every entry that names it. Its fingerprints name a schedule in the store's fences, and
``schedule_digest`` joins them into one for a beat's whole schedule. Kept apart from entries.py,
which holds what the scheduler keeps of each entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping
from datetime import timedelta, tzinfo
from functools import cached_property
from operator import attrgetter
from typing import TYPE_CHECKING, Any, cast

from celery.schedules import BaseSchedule, crontab, schedule, solar

from celery_hashbeat.entries.derived import DerivedSlots, crontab_slots
from celery_hashbeat.entries.errors import EntryError
from celery_hashbeat.entries.oneshot import OnceSlots
from celery_hashbeat.expr.calendar import Calendar, parse_calendar
from celery_hashbeat.expr.slots import CalendarSlots, ChainSlots, CronSlots, Slots, duration_ms
from celery_hashbeat.schedules import at, hashcron, hashinterval

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.entries.entry import Entry


class SharedSlots:
    """Builds each entry's slot source, sharing one among entries whose schedules agree, so a
    hundred thousand entries hold a few hundred parsed expressions between them."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self._shared: dict[Hashable, Slots] = {}
        self._prints: dict[tuple[Hashable, ...], str] = {}
        self._objects: dict[tuple[timedelta, bool], schedule] = {}
        #: Entries (or copies of them) whose schedule was replaced in place since the scheduler
        #: last looked.
        self.changed: list[Entry] = []
        #: The last schedule whose identity was derived, and the identity: building an entry
        #: asks twice (its slots and its fingerprint), a million entries at start.
        self._derived: tuple[Any, Hashable | None] = (None, None)
        #: Placed hashcron schedules (expression, offsets, day rule, zone as given) -> their
        #: slots: the name does not enter a placed schedule's values.
        self._placed: dict[tuple[Any, ...], Slots] = {}
        self._calendars: dict[tuple[str, ...], Calendar] = {}
        #: Calendar-wrapped sources by (the inner source's id, specs, zone, mode); each holds its
        #: inner source, which the shared table keeps alive, so an id is never reused here.
        self._excluding: dict[tuple[Any, ...], CalendarSlots] = {}

    @cached_property
    def zone(self) -> tzinfo:
        """The app's timezone (read once: the app is configured before a scheduler starts)."""
        zone: tzinfo = self.app.timezone
        return zone

    @cached_property
    def zone_name(self) -> str:
        return str(self.zone)

    def _identity_of(self, given: BaseSchedule) -> Hashable | None:
        last, identity = self._derived
        if last is not given:
            identity = derived_identity(given)
            self._derived = (given, identity)
        return identity

    def schedule_object(self, given: Any, relative: bool) -> Any:
        """``given`` as a schedule object, as Celery's entries hold it: seconds and timedeltas
        become one shared ``schedule`` per interval; any other schedule is kept, given the app
        if it has none."""
        if isinstance(given, BaseSchedule):
            if getattr(given, "_app", None) is None:
                given.app = self.app  # as Celery's entries do, so its clock and zone are the app's
            return given
        if isinstance(given, int | float) and not isinstance(given, bool):
            given = timedelta(seconds=given)
        if not isinstance(given, timedelta):
            return given
        found = self._objects.get((given, relative))
        if found is None:
            found = self._objects[(given, relative)] = schedule(given, relative, app=self.app)
        return found

    def _share(self, identity: Hashable, make: Any) -> Slots:
        found = self._shared.get(identity)
        if found is None:
            found = self._shared[identity] = make()
        return found

    def source(self, name: str, given: Any, relative: bool) -> Slots:
        """The slots of ``given`` (any schedule Celery accepts, or ours) for entry ``name``."""
        if type(given) is at:  # before the checks of kind, which are slow: one-shots are many
            return OnceSlots(given.instant_ms)
        if isinstance(given, hashcron):
            if given.offsets is None or type(given.expr) is not str:
                return self._cron(name, given)
            # Placed by the balancer: its values are the offsets, whatever the name, so a
            # million balanced entries resolve their few placed schedules once each.
            placed = (given.expr, given.offsets, given.day_and, given.zone)
            found = self._placed.get(placed)
            if found is None:
                found = self._placed[placed] = self._cron(name, given)
            return found
        if isinstance(given, hashinterval):
            return given.interval_slots(name)
        if isinstance(given, at):
            return OnceSlots(given.instant_ms)
        if isinstance(given, int | float) and not isinstance(given, bool):
            given = timedelta(seconds=given)
        if isinstance(given, timedelta):
            given = schedule(given, relative, app=self.app)
        if type(given) is schedule and not given.relative:
            every = duration_ms(given.run_every)  # type: ignore[attr-defined]
            return self._share(("every", every), lambda: ChainSlots(every))
        if type(given) is crontab:
            zone = self.zone
            return self._share(
                (self._identity_of(given), self.zone_name), lambda: crontab_slots(given, zone)
            )
        if isinstance(given, BaseSchedule):
            identity = self._identity_of(given)
            if identity is None:
                return DerivedSlots(given, self.app)
            return self._share(identity, lambda: DerivedSlots(given, self.app))
        raise EntryError(
            f"entry {name!r}: unknown schedule type {type(given).__name__}: use hashcron, "
            f"hashinterval, crontab, solar, a celery.schedules.schedule, a timedelta or seconds"
        )

    def _cron(self, name: str, given: hashcron) -> Slots:
        """The slots of a hashcron keyed by ``name`` (unless it has a key or offsets of its own),
        shared by the entries whose resolved expressions, day rules and zones agree."""
        resolved = given.identity(name, self.zone_name)
        if resolved is None:
            given.compile(name, self.zone)  # raises what is wrong
        found = self._shared.get(resolved)  # the one kind keyed by (text, day rule, zone)
        if found is None:
            found = self._shared[resolved] = CronSlots(given.compile(name, self.zone))
        return found

    def calendar(self, specs: tuple[str, ...]) -> Calendar:
        """The calendar of an exclude list, parsed once for every entry that gives it."""
        found = self._calendars.get(specs)
        if found is None:
            found = self._calendars[specs] = parse_calendar(specs)
        return found

    def excluding(
        self, source: Slots, specs: tuple[str, ...], zone: tzinfo, mode: str
    ) -> CalendarSlots:
        """``source`` without the days ``specs`` exclude, shared by entries that agree."""
        identity = ("calendar", id(source), specs, str(zone), mode)
        found = self._excluding.get(identity)
        if found is None:
            found = CalendarSlots(source, self.calendar(specs), zone, mode)
            self._excluding[identity] = found
        return found

    def fingerprint(self, given: Any, relative: bool) -> str:
        """A short digest of what decides an entry's slots, the same in every process and
        release, so that the store can tell a changed schedule from the one it fenced. Computed
        once per distinct schedule: at 100,000 entries, start-up time is the budget. A one-shot's
        is its own (no two share an instant), so it is made from its instant, not kept."""
        if type(given) is at:
            return _digest(f"at {given.instant_ms}")  # the text its identity reads as
        identity = self._identity(given, relative)
        found = self._prints.get(identity)
        if found is None:
            text = " ".join(
                str(sorted(part) if isinstance(part, frozenset) else part) for part in identity
            )
            found = self._prints[identity] = _digest(text)
        return found

    def _identity(self, given: Any, relative: bool) -> tuple[Hashable, ...]:
        zone = self.zone_name
        if isinstance(given, hashcron):
            cron = ("hashcron", given.expr, given.key, str(given.zone or zone), given.day_and)
            # A balanced entry's slots follow its assignment: a move is a changed schedule.
            return cron if given.offsets is None else (*cron, given.offsets)
        if isinstance(given, hashinterval):
            return ("hashinterval", given.every, given.key)
        if isinstance(given, at):
            return ("at", given.instant_ms)
        if isinstance(given, int | float) and not isinstance(given, bool):
            given = timedelta(seconds=given)
        if isinstance(given, timedelta):
            return ("every", given, relative)
        if type(given) is schedule:
            return ("every", given.run_every, given.relative)  # type: ignore[attr-defined]
        identity = self._identity_of(given) if isinstance(given, BaseSchedule) else None
        if identity is not None:
            return (*cast(tuple[Hashable, ...], identity), zone)
        shown = repr(given)
        return (type(given).__qualname__, "" if " at 0x" in shown else shown)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def schedule_digest(entries: Mapping[str, Entry]) -> str:
    """What a beat runs (entries by name), in a few characters: the same for beats of one
    configuration: each name, 0x1f, its fingerprint, 0x1e, by name. The pairs are read in the
    order the entries were made and then sorted (names differ: fingerprints are never compared),
    not looked up by sorted name: a million entries at start, each lookup a miss of the cache."""
    pairs = sorted(zip(entries, map(attrgetter("fingerprint"), entries.values()), strict=True))
    return _digest("".join(["\x1e".join(map("\x1f".join, pairs)), "\x1e" if pairs else ""]))


def derived_identity(schedule_: BaseSchedule) -> Hashable | None:
    """What makes two Celery schedules fire alike, for the kinds whose fields say so."""
    kind, given = type(schedule_), cast(Any, schedule_)
    if kind is crontab:
        fields = (given.minute, given.hour, given.day_of_week, given.day_of_month)
        return ("crontab", *map(frozenset, fields), frozenset(given.month_of_year))
    if kind is schedule:
        return ("relative", given.run_every)
    if kind is solar:
        return ("solar", given.event, given.lat, given.lon)
    return None
