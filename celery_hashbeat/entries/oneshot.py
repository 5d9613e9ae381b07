"""One-shot entries (docs/design.md §21): one slot, then done.

The slot is the ``at`` instant. Once a beat claims it the store's fence holds exactly that slot,
which is how every later leader, restart or re-read of the configuration knows the run is done:
the entry plans no slot after it. A one-shot that was never claimed is planned as if its fence
lay just before the instant, so a beat that was down at the instant sends it late by the
entry's catch-up rules (``catch_up``, ``catch_up_window``), or not at all.
"""

from __future__ import annotations

from celery_hashbeat.entries.errors import EntryFinished
from celery_hashbeat.expr.slots import Slots, to_datetime

#: How long a done one-shot kept in the store stays there after its instant: the leader removes
#: it after this (its history records stay, as any removed entry's do).
DONE_RETENTION_MS = 7 * 24 * 3600 * 1000


class OnceSlots(Slots):
    """The one slot of a one-shot."""

    __slots__ = ("instant",)

    def __init__(self, instant: int) -> None:
        self.instant = instant

    def next_after(self, ms: int) -> int:
        if ms < self.instant:
            return self.instant
        raise EntryFinished(f"it is a one-shot, and its one slot, {_iso(self.instant)}, is done")

    def recent(self, low: int, high: int, limit: int) -> list[int]:
        return [self.instant] if limit > 0 and low < self.instant <= high else []

    def counts_from(self, fence: int | None) -> int | None:
        """Where planning starts: after the instant once it was claimed (the fence is that very
        slot), else just before it, whatever an anchor or a floor says."""
        return fence if fence == self.instant else self.instant - 1


def _iso(ms: int) -> str:
    return to_datetime(ms).isoformat(timespec="seconds")


def once_state(
    source: Slots, fence_slot: int | None, next_slots: list[int], paused: bool = False
) -> str | None:
    """What the views say of a one-shot: done (sent, or not sent by its catch-up rules), paused,
    or to come; None for any other schedule."""
    if not isinstance(source, OnceSlots):
        return None
    when = _iso(source.instant)
    if fence_slot == source.instant:
        return f"done: sent its one slot, {when}"
    if paused:
        return f"paused: its one slot is {when}; resumed, its catch-up rules say if it is sent"
    if not next_slots:
        return f"done: its one slot, {when}, was not sent (missed; its catch-up left it out)"
    return f"to come, at {when}"
