"""``ScheduleAdmin``: change the schedule while the beats run (DESIGN.md §13).

Every change is checked as the beats would build it before anything is written, and written
in one atomic store call; the leader applies it within a second. Config entries (those in
``beat_schedule``) can be paused, resumed and triggered; store entries can also be added,
updated and removed.
"""

from __future__ import annotations

import builtins
import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from celery_hashbeat.control.definitions import (
    STORED_KEYS,
    DefinitionError,
    Pause,
    Trigger,
    check_name,
    decode,
    decode_pause,
    encode,
    encode_pause,
    encode_trigger,
    schedule_data,
)
from celery_hashbeat.entries.building import as_definition, build_entry
from celery_hashbeat.entries.errors import EntryError, ScheduleEnded
from celery_hashbeat.entries.sharing import SharedSlots
from celery_hashbeat.observe.history import Record
from celery_hashbeat.observe.history import decode as decode_record
from celery_hashbeat.settings import Settings
from celery_hashbeat.store import open_store
from celery_hashbeat.store.controls import DEFINITION, PAUSE

if TYPE_CHECKING:
    from collections.abc import Callable

    from celery import Celery

    from celery_hashbeat.store import Store

#: Slots listed per entry by ``get`` and ``list``.
NEXT_SLOTS = 10

#: Outcomes listed per entry by ``get``.
RECENT = 10


class AdminError(ValueError):
    """A change refused; nothing was written. The message says what was wrong and what to do."""

    #: The ``hashbeat`` command's exit code for it (2: bad input, as click's usage errors).
    exit_code = 2


class UnknownEntryError(AdminError):
    """No entry of that name, in the configuration or the store."""

    exit_code = 3


@dataclass(frozen=True)
class EntryView:
    """One entry as ``list`` and ``get`` show it."""

    name: str
    #: "config" (beat_schedule) or "store".
    source: str
    #: The definition as JSON data (a config entry's schedule as stored data where it can be).
    definition: dict[str, Any]
    pause: Pause | None
    #: The next slots (epoch ms), up to NEXT_SLOTS; empty if they cannot be computed here.
    next_slots: list[int]
    recent: list[Record]

    @property
    def paused(self) -> bool:
        return self.pause is not None and self.pause.paused


class ScheduleAdmin:
    """The schedule of ``app``'s beats, changed at run time through its store."""

    def __init__(self, app: Celery, store: Store | None = None) -> None:
        self.app = app
        self.settings = Settings.from_conf(app.conf, warn=False)
        self._store = store
        self._shared = SharedSlots(app)
        self._finalized = False
        #: Wall-clock seconds since the epoch, as the beats' (changes are stamped with it).
        self.clock: Callable[[], float] = time.time

    @property
    def store(self) -> Store:
        if self._store is None:
            settings = self.settings
            self._store = open_store(
                settings.store_url, prefix=settings.key_prefix, **settings.store_options
            )
        return self._store

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    # Store entries ----------------------------------------------------------------------------

    def add(
        self,
        name: str,
        task: str,
        schedule: Any,
        args: Any = (),
        kwargs: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        *,
        allow_unregistered_task: bool = False,
        **more: Any,
    ) -> None:
        """Add a store entry; it fires at its first slot after now. ``more`` takes the other
        definition keys (catch_up, catch_up_window, overlap, workers, start, end, max_runs)."""
        self._not_configured(name, "add")
        definition = {
            "task": task,
            "schedule": schedule,
            "args": args,
            "kwargs": kwargs,
            "options": options,
            **more,
        }
        text = self._checked(name, definition, allow_unregistered_task)
        if self.store.edit(name, {DEFINITION: text}, require=False) is None:
            raise AdminError(
                f"entry {name!r} is in the store already: change it with update, or remove it first"
            )

    def update(self, name: str, *, allow_unregistered_task: bool = False, **changes: Any) -> None:
        """Change some fields of a store entry (None removes an optional one); applied from
        its next slot after the update, with nothing caught up from before it."""
        self._not_configured(name, "update")
        unknown = set(changes) - set(STORED_KEYS)
        if unknown:
            raise AdminError(f"cannot update {sorted(unknown)}; fields: {', '.join(STORED_KEYS)}")
        current = self._stored_definition(name)
        for key in ("task", "schedule"):
            if key in changes and changes[key] is None:
                raise AdminError(f"entry {name!r}: {key!r} cannot be removed, only changed")
        text = self._checked(name, {**current, **changes}, allow_unregistered_task)
        if self.store.edit(name, {DEFINITION: text}, require=True) is None:
            raise UnknownEntryError(f"entry {name!r} was removed from the store meanwhile")

    def remove(self, name: str) -> None:
        """Remove a store entry (and its pause); its slots stop, its history stays."""
        self._not_configured(name, "remove")
        if self.store.edit(name, {DEFINITION: None, PAUSE: None}, require=True) is None:
            raise UnknownEntryError(f"no store entry {name!r}: `hashbeat entries` lists them")

    # Any entry --------------------------------------------------------------------------------

    def pause(self, name: str, reason: str = "") -> None:
        """Send nothing of the entry until it is resumed (triggers still go out)."""
        self._existing(name)
        record = encode_pause(Pause(True, reason, self._now_ms()))
        self.store.edit(name, {PAUSE: record})

    def resume(self, name: str, catch_up: bool = False) -> None:
        """Send the entry's slots again: from now on, or, with ``catch_up``, from its last sent
        slot, as its catch-up policy says (a long pause with catch_up="all" sends a burst). An
        entry that is not paused is left as it is."""
        self._existing(name)
        pause = self._pause(name, self.store.controls_of(name)[1])
        if pause is None or not pause.paused:
            return
        record = None if catch_up else encode_pause(Pause(False, resumed=self._now_ms()))
        self.store.edit(name, {PAUSE: record})

    def trigger(self, name: str) -> str:
        """Ask for one run now, with a task id of its own; returns that id. The leader sends it
        within a second (or when a beat leads again), once; the entry's slots do not move."""
        self._existing(name)
        task_id = str(uuid.uuid4())
        self.store.ask(encode_trigger(Trigger(name, task_id, self._now_ms())))
        return task_id

    def get(self, name: str) -> EntryView:
        views = self._views([name])
        if not views:
            raise UnknownEntryError(self._unknown(name))
        return views[0]

    def list(self) -> builtins.list[EntryView]:
        return self._views(None)

    # Helpers ----------------------------------------------------------------------------------

    def _configured(self) -> dict[str, Any]:
        """beat_schedule as beat sees it: with the entries the app's task modules add
        (``add_periodic_task`` runs when the app is finalized)."""
        if not self._finalized:
            self.app.loader.import_default_modules()
            self.app.finalize(auto=True)
            self._finalized = True
        return dict(self.app.conf.beat_schedule or {})

    def _not_configured(self, name: str, what: str) -> None:
        check_name_or_refuse(name)
        if name in self._configured():
            raise AdminError(
                f"entry {name!r} is in beat_schedule, so it cannot be changed with {what}: edit "
                f"the configuration instead (pause, resume and trigger work on it)"
            )

    def _stored_definition(self, name: str) -> dict[str, Any]:
        definition = self.store.controls_of(name)[0]
        if definition is None:
            raise UnknownEntryError(f"no store entry {name!r}: add it first (`hashbeat entries`)")
        try:
            return decode(name, definition).definition
        except DefinitionError:
            return {}  # replaced whole by the update, which must then give task and schedule

    def _existing(self, name: str) -> None:
        if name in self._configured():
            return
        if self.store.controls_of(name)[0] is None:
            raise UnknownEntryError(self._unknown(name))

    def _unknown(self, name: str) -> str:
        return (
            f"no entry {name!r} in beat_schedule or in the store ({self.settings.store_url}, "
            f"prefix {self.settings.key_prefix!r}): `hashbeat entries` lists them"
        )

    def _checked(self, name: str, definition: dict[str, Any], any_task: bool) -> str:
        """The definition's stored text, once it is known to build as the beats will."""
        try:
            text = encode(name, definition, self._now_ms())
            decoded = decode(name, text).definition
            decoded.pop("workers", None)
            build_entry(name, decoded, self.settings, self._shared, self._now_ms())
        except (DefinitionError, EntryError) as exc:
            raise AdminError(str(exc)) from None
        task = definition["task"]
        if not any_task and task not in self.app.tasks:
            raise AdminError(
                f"entry {name!r}: task {task!r} is not registered in app {self.app.main!r}; "
                f"check its name, or, for a task only the workers import, allow it "
                f"(allow_unregistered_task=True, or --allow-unregistered-task)"
            )
        return text

    def _views(self, wanted: builtins.list[str] | None) -> builtins.list[EntryView]:
        configured = self._configured()
        records = self.store.changes(0).records
        names = sorted({*configured, *(n for n, (d, _) in records.items() if d is not None)})
        views = []
        chosen = names if wanted is None else [n for n in wanted if n in names]
        fences = self.store.fences(chosen) if chosen else {}
        for name in chosen:
            stored, pause_text = records.get(name, (None, None))
            if name in configured:
                source, definition = "config", self._config_data(name, configured[name])
            else:
                source, definition = "store", _stored_data(name, cast(str, stored))
            pause = self._pause(name, pause_text)
            fence = fences.get(name)
            marks = [0 if fence is None else fence.slot, (pause and pause.resumed) or 0]
            if source == "store" and "unreadable" not in definition:
                marks.append(decode(name, cast(str, stored)).changed)
            views.append(
                EntryView(
                    name,
                    source,
                    definition,
                    pause,
                    self._next_slots(name, configured.get(name, stored), max(marks) or None),
                    [r for r in map(decode_record, self.store.history(name, RECENT)) if r],
                )
            )
        return views

    def _config_data(self, name: str, given: Any) -> dict[str, Any]:
        definition = as_definition(given) or {}
        data = {key: definition.get(key) for key in ("task", "args", "kwargs", "options")}
        try:
            data["schedule"] = schedule_data(name, definition.get("schedule"))
        except DefinitionError:
            data["schedule"] = repr(definition.get("schedule"))
        data["args"] = list(data["args"] or ())
        data["kwargs"], data["options"] = dict(data["kwargs"] or {}), dict(data["options"] or {})
        return data

    def _pause(self, name: str, text: str | None) -> Pause | None:
        try:
            return None if text is None else decode_pause(name, text)
        except DefinitionError:
            return None

    def _next_slots(self, name: str, given: Any, since: int | None) -> builtins.list[int]:
        """The entry's next slots as its hash gives them (a balanced entry's may differ: the
        leader's assignment decides); none for one that cannot be built here. A plain
        interval's count from ``since`` (the later of its fence and its last add, update or
        resume, as the leader counts them), or from now when there is none."""
        now = self._now_ms()
        try:
            definition = dict(decode(name, given).definition if isinstance(given, str) else given)
            definition.pop("workers", None)
            source = build_entry(name, definition, self.settings, self._shared, now).source
        except Exception:
            return []
        slots: builtins.list[int] = []
        after = now
        try:
            if source.chained and since is not None:
                after = (source.recent(since, now, 1) or [since])[-1]
            while len(slots) < NEXT_SLOTS:
                slots.append(source.next_after(slots[-1] if slots else after))
        except ScheduleEnded:
            pass
        return slots


def _stored_data(name: str, text: str) -> dict[str, Any]:
    """A stored definition as its JSON data; one that does not read back (written by hand) is
    shown as ``{"unreadable": why, "stored": text}``, since the beats log and skip it."""
    try:
        decode(name, text)
    except DefinitionError as exc:
        return {"unreadable": str(exc), "stored": text}
    data: dict[str, Any] = json.loads(text)
    data.pop("changed", None)
    return data


def check_name_or_refuse(name: str) -> None:
    try:
        check_name(name)
    except DefinitionError as exc:
        raise AdminError(str(exc)) from None
