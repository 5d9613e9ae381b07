"""The beat's side of the runtime controls (docs/design.md §13): what operators changed in
the store.

Every beat polls the store's change version (one small call every POLL_S) and reads only the
names changed since; so every beat, standby or leader, knows the stored entries and the pauses
when it takes over. What a beat learns is kept here as plain data:

- the stored entries' definitions (an unreadable one is logged once by name and left out);
- the entries paused now, with why;
- *floors*: for an entry added, updated or resumed, the instant before which none of its slots is
  ever sent or caught up, so that no leader, now or after a failover, sends a back-dated run;
- whether triggers wait for the leader.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat._outage import Once
from celery_hashbeat.control.definitions import decode
from celery_hashbeat.control.pause_and_trigger import Pause, decode_pause
from celery_hashbeat.control.stored_text import DefinitionError

if TYPE_CHECKING:
    from celery_hashbeat.store.controls import Changes

logger = SCHEDULER

#: Seconds between two reads of the change version: a change applies within a second.
POLL_S = 0.5


@dataclass
class Changed:
    """What one poll found changed."""

    #: Store entries added or changed (their definitions) and removed (None).
    definitions: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    #: Whether ``definitions`` lists every store entry.
    full: bool = False
    #: Entries resumed: name -> the floor they resume from, or None to resume from the fence.
    resumed: dict[str, int | None] = field(default_factory=dict)
    #: Store entries whose stored definition cannot be read (their fences are kept).
    unreadable: set[str] = field(default_factory=set)


class ControlState:
    """What this beat knows of the store's runtime controls."""

    def __init__(self, report_unreadable: bool = True) -> None:
        """``report_unreadable``: log each unreadable stored value once (a beat does; a command
        that lists them itself does not)."""
        self.version = 0
        #: Whether the store's controls were read at least once.
        self.known = False
        self.paused: dict[str, Pause] = {}
        self.floors: dict[str, int] = {}
        self.triggers_waiting = 0
        #: How many slots handed over by their claimers wait for the leader (docs/design.md §5).
        self.handed_waiting = 0
        #: When to poll next (monotonic seconds).
        self.due_s = 0.0
        self._report_unreadable = report_unreadable
        #: Stored values already reported unreadable, so each is logged once.
        self._unreadable = Once()

    def poll(self, changes: Changes, apply: Callable[[Changed], None] | None = None) -> Changed:
        """Take in what the store's ``changes(self.version)`` answered: what changed since the
        last poll. The next poll is due ``POLL_S`` from now.

        ``version`` moves last, once every record is read and ``apply`` (when given) has applied
        the result: a poll that fails part-way is read again whole, never half-forgotten. Each
        unreadable record costs itself alone (``Changed.unreadable``)."""
        self.due_s = time.monotonic() + POLL_S
        changed = Changed(full=changes.full)
        if changes.full:
            for name in set(self.paused) - set(changes.records):
                changed.resumed[name] = None
            self.paused.clear()
        for name, (definition, pause) in changes.records.items():
            changed.definitions[name] = self._definition(name, definition, changed)
            self._pause(name, pause, changed)
        if apply is not None:
            apply(changed)
        self.version, self.triggers_waiting = changes.version, changes.triggers
        self.handed_waiting = changes.handed
        self.known = True
        return changed

    def _definition(self, name: str, text: str | None, changed: Changed) -> dict[str, Any] | None:
        if text is None:
            return None
        try:
            stored = decode(name, text)
        except DefinitionError as exc:
            self._report(name, text, exc)
            changed.unreadable.add(name)
            return None
        self._raise_floor(name, stored.changed)
        return stored.definition

    def _pause(self, name: str, text: str | None, changed: Changed) -> None:
        was_paused = name in self.paused
        pause = None
        if text is not None:
            try:
                pause = decode_pause(name, text)
            except DefinitionError as exc:
                self._report(name, text, exc)
        if pause is not None and pause.paused:
            if not was_paused:
                logger.info(
                    "beat: entry %r is paused (%s)", name, pause.reason or "no reason given"
                )
            self.paused[name] = pause
            return
        self.paused.pop(name, None)
        if pause is not None and pause.resumed is not None:
            self._raise_floor(name, pause.resumed)
        if was_paused:
            logger.info(
                "beat: entry %r is resumed, %s",
                name,
                "from now" if pause is not None else "catching up as its policy says",
            )
            changed.resumed[name] = self.floors.get(name) if pause is not None else None

    def _raise_floor(self, name: str, floor: int) -> None:
        if floor > self.floors.get(name, 0):
            self.floors[name] = floor

    def _report(self, name: str, text: str, exc: Exception) -> None:
        if self._report_unreadable and self._unreadable.first((name, text)):
            logger.error(
                "beat: skipping what the store holds for entry %r: %s (rewrite it with "
                "`hashbeat update` or `hashbeat remove`)",
                name,
                exc,
            )
