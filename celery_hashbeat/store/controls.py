"""What operators change while the beats run (docs/design.md §13): stored entries, pauses, triggers.

The store keeps three things for the runtime controls, all opaque text to it (JSON written and
read by ``celery_hashbeat.control.definitions``), none of them lease-checked on the way in, since an
operator writes them whether or not a beat runs:

- per name, a *definition* (an entry kept in the store beside ``beat_schedule``) and a *pause*
  record (for any entry, configured or stored); an update replaces a definition only if it is
  still the one the update read (``swap_definition``), so concurrent updates never lose one;
- a *version*, raised by every write, with each name marked by the version of its last change,
  so that a beat reads only what changed since the version it last saw (10,000 stored entries
  are read once, not once per change);
- a queue of *triggers* (one run now, asked by an operator) and backfill requests, which the
  leader takes under its lease. A take keeps what it took, as *taken by* that leader, until the
  leader settles its turn (``give_back_triggers``: what goes back to the head of the queue, and
  the taken record cleared in the same step). The next take by whoever holds the lease then
  hands back, first and counted as *recovered*, whatever an earlier take left unsettled (its
  leader was killed or cut off mid-turn, or its settle went unanswered), so nothing taken is
  ever dropped by the store. What a leader does with a recovered item is its own rule
  (docs/design.md §19): a backfill request is sent again (the record of sent slots keeps each
  slot once), a trigger is not (nothing records that it went out, so it is logged, at most
  once).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The two things kept per name.
DEFINITION = "definition"
PAUSE = "pause"
KINDS = (DEFINITION, PAUSE)


class Taken(list[str]):
    """What a take hands the leader, oldest first (the list itself): the first ``recovered``
    of them an earlier take left unsettled, then those that waited in the queue."""

    __slots__ = ("recovered",)

    def __init__(self, items: Sequence[str] = (), recovered: int = 0) -> None:
        super().__init__(items)
        self.recovered = recovered


@dataclass(frozen=True)
class Changes:
    """What changed since a version: ``records`` maps each name changed to its (definition,
    pause), None where nothing is stored. ``full`` means every name is listed (a first read, or
    a store that was emptied), so a name missing from it has nothing stored."""

    version: int
    records: dict[str, tuple[str | None, str | None]]
    full: bool
    #: How many triggers and backfill requests wait for the leader: those queued, and those a
    #: take left unsettled (to be recovered by the next take).
    triggers: int
    #: How many slots handed over (``Store.hand_over``) wait for the leader.
    handed: int = 0


class ControlRecords(abc.ABC):
    """The runtime-control half of the store protocol."""

    @abc.abstractmethod
    def edit(
        self, name: str, values: Mapping[str, str | None], require: bool | None = None
    ) -> int | None:
        """Set (text) or delete (None) ``name``'s DEFINITION and/or PAUSE in one atomic step,
        raising the version. ``require`` True or False asks that a definition be, or not be,
        stored already; if not, nothing changes and None is returned. Returns the new version."""

    @abc.abstractmethod
    def swap_definition(self, name: str, expected: str, definition: str) -> int | None:
        """Compare-and-set: replace ``name``'s definition with ``definition`` only if the stored
        one is still exactly ``expected``, in one atomic step raising the version (its pause
        stays). Returns the new version, or None (nothing changed) when the stored definition
        is another, or gone: someone changed or removed it since ``expected`` was read."""

    @abc.abstractmethod
    def changes(self, since: int) -> Changes:
        """The records changed after version ``since`` (all of them when ``since`` is 0 or
        later than the store's version, which means the store was emptied)."""

    @abc.abstractmethod
    def controls_of(self, name: str) -> tuple[str | None, str | None]:
        """``name``'s (definition, pause), None where nothing is stored: one name's records,
        read without reading every other name's."""

    @abc.abstractmethod
    def ask(self, trigger: str) -> int:
        """Queue a trigger; returns the new version."""

    @abc.abstractmethod
    def triggers(self) -> list[str]:
        """The triggers (and backfill requests) waiting, oldest first: those a take left
        unsettled, then the queue."""

    @abc.abstractmethod
    def take_triggers(self, token: str) -> Taken:
        """Only while ``token`` holds the lease (empty otherwise), in one atomic step: take
        every item an earlier take left unsettled (``recovered``, whoever took it) and every
        item of the queue, oldest first, and keep them all as taken by ``token`` until it
        settles (``give_back_triggers``)."""

    @abc.abstractmethod
    def give_back_triggers(self, token: str, triggers: Sequence[str]) -> bool:
        """Settle ``token``'s turn, only while it holds the lease: put ``triggers`` (what is to
        be taken again; none is fine) back at the head of the queue, in order, and clear what
        ``token`` took, in one atomic step. True if it did. Called after every take that took
        something, or the next take recovers it all again."""


def check_values(values: Mapping[str, str | None]) -> None:
    """Only the two kinds may be written."""
    unknown = set(values) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown record kinds {sorted(unknown)}; known: {list(KINDS)}")
