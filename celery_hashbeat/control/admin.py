"""``ScheduleAdmin``: change the schedule while the beats run (docs/design.md §13).

Every change is checked by the beats' own build path (the catalog) before anything is written,
and written in one atomic store call; the leader applies it within a second. Config entries
(those in ``beat_schedule``) can be paused, resumed and triggered; store entries can also be
added, updated and removed. What it shows of an entry (control/views.py) is the catalog a
leader holds and the slots it plans (docs/design.md §8).
"""

from __future__ import annotations

import builtins
import copy
import time
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from celery_hashbeat.control import backfill as backfills
from celery_hashbeat.control.audit import Change, as_data, trail, who_am_i
from celery_hashbeat.control.audit import record as write_change
from celery_hashbeat.control.definitions import decode
from celery_hashbeat.control.entry_edits import (
    check_changes,
    check_revision,
    checked_text,
    conflict,
    decoded,
    refuse_configured,
)
from celery_hashbeat.control.pause_and_trigger import Pause, Trigger, encode_pause, encode_trigger
from celery_hashbeat.control.refusals import (
    AdminError,
    ConflictError,
    RunInProgressError,
    UnknownEntryError,
    admin_errors,
    check_text,
    one_shot_or,
)
from celery_hashbeat.control.triggered import Triggered
from celery_hashbeat.control.views import (
    NEXT_SLOTS,
    RECENT,
    EntryView,
    Planned,
    entry_views,
    pause_of,
    plan_schedule,
    recent_outcomes,
    stored_data,
)
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.observe.history import Record
from celery_hashbeat.settings import Settings
from celery_hashbeat.store import open_store
from celery_hashbeat.store.controls import DEFINITION, PAUSE
from celery_hashbeat.store.operations import AUDIT_KEEP
from celery_hashbeat.store.options import mask_url

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from celery import Celery

    from celery_hashbeat.control.polling import ControlState
    from celery_hashbeat.store import Store


class ScheduleAdmin:
    """The schedule of ``app``'s beats, changed at run time through its store. Every failure
    is an AdminError or one of its subclasses (UnknownEntryError, StoreProblemError,
    ConflictError, RunInProgressError)."""

    def __init__(self, app: Celery, store: Store | None = None, who: str | None = None) -> None:
        """``who`` names the user on whose behalf the changes are made (the console's Django
        user), for the audit trail, beside the process's OS user and host."""
        self.app = app
        self.who = who
        try:
            self.settings = Settings.from_conf(app.conf, warn=False)
        except Exception as exc:  # ImproperlyConfigured, worded for the setting at fault
            raise AdminError(str(exc)) from None
        self._store = store
        self._finalized = False
        #: Wall-clock seconds since the epoch, as the beats' (changes are stamped with it).
        self.clock: Callable[[], float] = time.time

    def on_behalf_of(self, who: str | None) -> ScheduleAdmin:
        """This admin, on the same store, recording its changes as made for ``who`` (a console
        shares one admin among its users, and names each request's)."""
        acting = copy.copy(self)
        acting.who = who
        return acting

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

    @admin_errors
    def add(
        self,
        name: str,
        task: str,
        schedule: Any = None,
        args: Any = (),
        kwargs: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        *,
        allow_unregistered_task: bool = False,
        at: Any = None,
        reason: str = "",
        **more: Any,
    ) -> None:
        """Add a store entry; it fires at its first slot after now. ``more`` takes the other
        definition keys (catch_up, catch_up_window, overlap, workers, start, end, max_runs,
        exclude, on_excluded). ``at`` (an aware datetime or ISO 8601 text) makes it a one-shot
        in place of ``schedule`` (docs/design.md §21)."""
        refuse_configured(name, self._configured, "add")
        schedule = one_shot_or(name, schedule, at)
        definition = {
            "task": task,
            "schedule": schedule,
            "args": args,
            "kwargs": kwargs,
            "options": options,
            **more,
        }
        text = checked_text(
            self.app, self.settings, self._now_ms, name, definition, allow_unregistered_task, 1
        )
        if self.store.edit(name, {DEFINITION: text}, require=False) is None:
            raise AdminError(
                f"entry {name!r} is in the store already: change it with update, or remove it first"
            )
        self._audit("add", name, None, stored_data(name, text), reason)

    @admin_errors
    def update(
        self,
        name: str,
        *,
        allow_unregistered_task: bool = False,
        revision: int | None = None,
        reason: str = "",
        **changes: Any,
    ) -> None:
        """Change some fields of a store entry (None removes an optional one); applied from
        its next slot after the update, with nothing caught up from before it. The stored
        definition is replaced only if it is still the one read here (and, with ``revision``,
        still that revision): a concurrent change makes it raise ConflictError, never lose
        one of the two."""
        refuse_configured(name, self._configured, "update")
        check_changes(name, changes)
        stored = self.store.controls_of(name)[0]
        if stored is None:
            raise UnknownEntryError(f"no store entry {name!r}: add it first (`hashbeat entries`)")
        current, current_revision = decoded(name, stored)
        check_revision(name, revision, current_revision)
        text = checked_text(
            self.app,
            self.settings,
            self._now_ms,
            name,
            {**current, **changes},
            allow_unregistered_task,
            current_revision + 1,
        )
        if self.store.swap_definition(name, stored, text) is None:
            raise ConflictError(conflict(name, "it was changed or removed meanwhile"))
        self._audit("update", name, stored_data(name, stored), stored_data(name, text), reason)

    @admin_errors
    def remove(self, name: str, reason: str = "") -> None:
        """Remove a store entry (and its pause); its slots stop, its history stays."""
        refuse_configured(name, self._configured, "remove")
        before = self.store.controls_of(name)[0]
        if self.store.edit(name, {DEFINITION: None, PAUSE: None}, require=True) is None:
            raise UnknownEntryError(f"no store entry {name!r}: `hashbeat entries` lists them")
        self._audit("remove", name, before and stored_data(name, before), None, reason)

    # Any entry --------------------------------------------------------------------------------

    @admin_errors
    def pause(self, name: str, reason: str = "") -> None:
        """Send nothing of the entry until it is resumed (triggers still go out)."""
        self._existing(name)
        if not isinstance(reason, str):
            raise AdminError(f"entry {name!r}: the reason must be text, not {reason!r}")
        before = self.store.controls_of(name)[1]
        who = str(who_am_i(self.who, self.settings.store_url))
        record = encode_pause(Pause(True, reason, self._now_ms(), who=who))
        self.store.edit(name, {PAUSE: record})
        self._audit("pause", name, as_data(before), as_data(record), reason)

    @admin_errors
    def resume(self, name: str, catch_up: bool = False, reason: str = "") -> bool:
        """Send the entry's slots again: from now on, or, with ``catch_up``, from its last sent
        slot, as its catch-up policy says (a long pause with catch_up="all" sends a burst).
        False, with nothing changed, for an entry that is not paused."""
        self._existing(name)
        before = self.store.controls_of(name)[1]
        pause = pause_of(name, before)
        if pause is None or not pause.paused:
            return False
        record = None if catch_up else encode_pause(Pause(False, resumed=self._now_ms()))
        self.store.edit(name, {PAUSE: record})
        self._audit("resume", name, as_data(before), as_data(record), reason, catch_up=catch_up)
        return True

    @admin_errors
    def trigger(self, name: str, force: bool = False, reason: str = "") -> Triggered:
        """Ask for one run now, with a task id of its own; returns that id (a Triggered, which
        says what becomes of it). The leader sends it within a second (or when a beat leads
        again), once, as the entry's ``overlap`` says (docs/design.md §12); the entry's slots do
        not move. With ``skip`` and a run in progress it raises RunInProgressError, unless
        ``force``, which sends it on top of the run and records it as forced."""
        asked = self._now_ms()
        definition = self._existing(name)
        entry = Catalog.trial(self.app, self.settings, asked, name, definition)
        running = None
        if entry.run_ttl_ms:
            # A fanned-out entry is tried as a copy: its copies' leases are looked for.
            held = self.store.running([name] if entry.name == name else None)
            running = next(
                (task for run, task in sorted(held.items()) if run.partition("@")[0] == name),
                None,
            )
        overlap = str(entry.overlap)
        if running is not None and overlap == "skip" and not force:
            raise RunInProgressError(
                f"entry {name!r} was not triggered: its run in progress (task {running}) holds "
                f"its run lease and its overlap is 'skip'; wait for the run to end, or run it "
                f"anyway with --force (force=True)"
            )
        task_id = str(uuid.uuid4())
        request = encode_trigger(Trigger(name, task_id, asked, force))
        self.store.ask(request)
        self._audit("trigger", name, None, as_data(request), reason, task_id=task_id, force=force)
        return Triggered(task_id, name, overlap, running, force)

    @admin_errors
    def backfill(
        self,
        name: str,
        start: datetime | str,
        end: datetime | str,
        dry_run: bool = False,
        reason: str = "",
        limit: int | None = backfills.BACKFILL_LIMIT,
    ) -> backfills.Backfill:
        """Send entry ``name``'s slots from ``start`` to ``end`` (aware datetimes or ISO 8601
        with a zone, both ends included) that were not sent: the leader sends each once, with its
        slot's task id, as the entry's overlap allows (control/backfill.py). ``dry_run`` only
        says which slots there are and which were sent; more than ``limit`` slots are refused
        (None: no limit). A fanned-out entry is backfilled copy by copy, each by its own name
        (``name@worker``)."""
        catalog = self.plan().catalog
        if name not in catalog.entries:
            self._existing(name)
        found = backfills.ask(
            self.store, catalog, name, (start, end), self._now_ms(), limit, dry_run
        )
        if found.request is not None:
            self._audit("backfill", name, None, None, reason, **found.details())
        return found

    @admin_errors
    def get(self, name: str) -> EntryView:
        check_text(name)
        views = self._views([name])
        if not views:
            raise UnknownEntryError(self._unknown(name))
        return views[0]

    @admin_errors
    def list(
        self,
        *,
        names: Sequence[str] | None = None,
        recent: int = RECENT,
        slots: int = NEXT_SLOTS,
        planned: Planned | None = None,
    ) -> builtins.list[EntryView]:
        """Every entry (or those of ``names`` that exist), with up to ``slots`` next slots and
        ``recent`` outcomes each (0: none, which saves a store call per entry), planned by
        ``planned`` when the caller has the plan already (``plan``), else planned now."""
        return self._views(None if names is None else builtins.list(names), recent, slots, planned)

    @admin_errors
    def plan(self, controls: ControlState | None = None) -> Planned:
        """The schedule as a leader holds it now: ``plan_schedule`` on this app and store (the
        store read through ``controls`` when given, to ``follow`` its changes later)."""
        return plan_schedule(
            self.app, self.settings, self._configured(), self.store, self._now_ms(), controls
        )

    def _views(
        self,
        wanted: builtins.list[str] | None,
        recent: int = RECENT,
        count: int = NEXT_SLOTS,
        planned: Planned | None = None,
    ) -> builtins.list[EntryView]:
        now = self._now_ms()
        if planned is None:
            planned = plan_schedule(self.app, self.settings, self._configured(), self.store, now)
        return entry_views(planned, self.store, now, wanted, recent, count)

    def recent(self, name: str, count: int = RECENT) -> builtins.list[Record]:
        """The entry's newest ``count`` outcomes, newest first by when each happened (records
        that do not read back are left out)."""
        return recent_outcomes(self.store, name, count)

    @admin_errors
    def audit(self, name: str | None = None, limit: int = AUDIT_KEEP) -> builtins.list[Change]:
        """The audit trail, newest first: every operator change, or entry ``name``'s."""
        return trail(self.store, name, limit)

    # Helpers ----------------------------------------------------------------------------------

    def _audit(
        self, action: str, name: str, before: Any, after: Any, reason: str, **details: Any
    ) -> None:
        """Record a change that landed in the audit trail (control/audit.py)."""
        who = who_am_i(self.who, self.settings.store_url)
        write_change(self.store, Change(action, name, who, before, after, reason, details=details))

    def _configured(self) -> dict[str, Any]:
        """beat_schedule as beat sees it: with the entries the app's task modules add
        (``add_periodic_task`` runs when the app is finalized)."""
        if not self._finalized:
            self.app.loader.import_default_modules()
            self.app.finalize(auto=True)
            self._finalized = True
        return dict(self.app.conf.beat_schedule or {})

    def _existing(self, name: str) -> Any:
        """The definition of entry ``name``, configured or stored."""
        check_text(name)
        configured = self._configured()
        if name in configured:
            return configured[name]
        stored = self.store.controls_of(name)[0]
        if stored is None:
            raise UnknownEntryError(self._unknown(name))
        return decode(name, stored).definition

    def _unknown(self, name: str) -> str:
        return (
            f"no entry {name!r} in beat_schedule or in the store "
            f"({mask_url(self.settings.store_url)}, prefix {self.settings.key_prefix!r}): "
            f"`hashbeat entries` lists them"
        )
