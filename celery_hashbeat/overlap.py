"""No run on top of a run, the beat's side (DESIGN.md §12).

A guarded entry's claim takes its run lease in the same store call (store/base.py RunGuard). When
another run still holds it, the entry's ``overlap`` decides: ``skip`` fences the slot and sends
nothing, ``buffer_one`` leaves the slot unclaimed and asks again shortly (a newer slot due
meanwhile takes its place), ``replace`` revokes the holder and sends. Skips are counted, and
logged once per run of skips rather than once per slot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from celery.utils.log import get_logger

from celery_hashbeat.messages import slot_iso, slot_task_id
from celery_hashbeat.store.base import RunGuard

if TYPE_CHECKING:
    from celery_hashbeat.entries import Entry

logger = get_logger(__name__)

#: How soon a slot waiting for its entry's previous run (``buffer_one``) asks again (ms).
WAIT_POLL_MS = 250


def run_guard(entry: Entry, slot: int) -> RunGuard | None:
    """The run lease a claim of ``entry``'s ``slot`` asks for; None for ``allow``."""
    if not entry.run_ttl_ms:
        return None
    return RunGuard(entry.overlap, slot_task_id(entry.name, slot), entry.run_ttl_ms)


class OverlapLog:
    """Slots not sent because a run was still going, per entry: counted always, logged when a
    run of them starts and when the entry runs again."""

    def __init__(self) -> None:
        #: Entry -> slots skipped since it last ran.
        self.skipping: dict[str, int] = {}
        #: Entry -> slots skipped since this beat started.
        self.skipped_total: dict[str, int] = {}
        #: Entry -> the slot waiting for the previous run to end (``buffer_one``).
        self.waiting: dict[str, int] = {}

    def skipped(self, entry: Entry, slot: int, holder: str) -> None:
        self._count(entry.name)
        if self.skipping[entry.name] == 1:
            logger.warning(
                "beat: %s slot %s skipped: its previous run (task %s) is still queued or "
                "running (overlap %r); further skips are counted and reported when it runs again",
                entry.name,
                slot_iso(slot),
                holder,
                entry.overlap,
            )

    def wait(self, entry: Entry, slot: int, holder: str) -> None:
        """``buffer_one``: ``slot`` waits; a slot that waited before it is skipped."""
        before = self.waiting.get(entry.name)
        self.waiting[entry.name] = slot
        if before is None:
            logger.info(
                "beat: %s slot %s waits for its previous run (task %s) to end; older waiting "
                "slots are skipped",
                entry.name,
                slot_iso(slot),
                holder,
            )
        elif before != slot:
            self._count(entry.name)

    def ran(self, entry: Entry, slot: int) -> None:
        """``entry``'s ``slot`` was claimed to run: report the skips that came before it."""
        waited = self.waiting.pop(entry.name, None)
        if waited is not None and waited != slot:
            self._count(entry.name)
        skipped = self.skipping.pop(entry.name, 0)
        if skipped:
            logger.warning(
                "beat: %s runs again at slot %s after %d skipped slot(s)",
                entry.name,
                slot_iso(slot),
                skipped,
            )

    def _count(self, name: str) -> None:
        self.skipping[name] = self.skipping.get(name, 0) + 1
        self.skipped_total[name] = self.skipped_total.get(name, 0) + 1
