"""What operators' controls hold back: paused entries, and where changed entries' slots count from.

A paused entry (or a copy of a paused entry) leaves the queue at its slot and waits here, parked,
until it is resumed; the slot it left at is recorded as skipped. An entry added, updated or
resumed has a *floor*: none of its slots before that instant is ever caught up, whatever its
fence says (docs/design.md §13). The floors and pauses themselves are read from the store by
``control.polling.ControlState``; this object applies them to entries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from celery_hashbeat.control.polling import ControlState
    from celery_hashbeat.entries.catalog import Catalog
    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.observe.watch import Watch


class Parking:
    """Owns the parked entries; reads the pauses and floors of ``controls``."""

    def __init__(
        self, controls: ControlState, catalog: Catalog, watch: Watch, now_ms: Callable[[], int]
    ) -> None:
        self._controls = controls
        self._catalog = catalog
        self._watch = watch
        self._now_ms = now_ms
        #: Paused entries taken off the queue at their slot, until they are resumed.
        self._parked: dict[str, Entry] = {}

    def holds(self, entry: Entry) -> bool:
        """Whether ``entry`` (or the entry it is a copy of) is paused; if so it is parked off
        the queue until resumed, and its slot is recorded as skipped."""
        name = entry.name
        if not self._catalog.held(name, self._controls.paused):
            return False
        self._parked[name] = entry
        if entry.slot is not None:
            self._watch.skipped(name, entry.slot, "paused", self._now_ms())
        return True

    def release(self, name: str) -> list[Entry]:
        """The parked entries of ``name`` (the entry and its copies), no longer parked."""
        parent_of = self._catalog.fanout.parent_of
        released = [e for n, e in self._parked.items() if (parent_of(n) or n) == name]
        for entry in released:
            del self._parked[entry.name]
        return released

    def clear(self) -> None:
        """Forget the parked entries (a new leader plans every entry afresh)."""
        self._parked.clear()

    def floor_of(self, entry: Entry, fence_slot: int | None) -> int | None:
        """Where ``entry``'s slots count from: its fence, or its floor if later (the catalog's
        rule, which the ``hashbeat`` commands plan by too)."""
        return self._catalog.counts_from(entry.name, fence_slot, self._controls.floors)
