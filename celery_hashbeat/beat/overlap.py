"""No run on top of a run, the beat's side (docs/design.md §12).

A guarded entry's claim takes its run lease in the same store call (store/values.py RunGuard). When
another run still holds it, the entry's ``overlap`` decides: ``skip`` fences the slot and sends
nothing, ``buffer_one`` leaves the slot unclaimed and asks again shortly (a newer slot due
meanwhile takes its place), ``replace`` revokes the holder and sends. Skips are counted, and
logged once per run of skips rather than once per slot.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING

from celery_hashbeat._logs import OVERLAP
from celery_hashbeat.publish.message import slot_iso, slot_task_id
from celery_hashbeat.store.values import Claimed, RunGuard

if TYPE_CHECKING:
    from collections.abc import Iterable

    from celery_hashbeat.entries.entry import Entry

logger = OVERLAP

#: How soon a slot waiting for its entry's previous run (``buffer_one``) asks again (ms).
WAIT_POLL_MS = 250


def run_guard(entry: Entry, slot: int) -> RunGuard | None:
    """The run lease a claim of ``entry``'s ``slot`` asks for; None for ``allow``."""
    if not entry.run_ttl_ms:
        return None
    return RunGuard(entry.overlap, slot_task_id(entry.name, slot), entry.run_ttl_ms)


class Verdict(Enum):
    """What the beat does with a due slot once the claim has answered."""

    SEND = "send"
    #: ``buffer_one`` while the previous run holds the lease: ask again in WAIT_POLL_MS.
    WAIT = "wait"
    #: Skipped, or a later slot is fenced already: plan the entry's next slot.
    MOVE_ON = "move on"


def warn_unreachable_leases(entries: Iterable[Entry], store_url: str) -> None:
    """Say once, at start, when the workers of guarded entries may not reach the run leases:
    an SQLite store is a file on the beat's host."""
    guarded = sorted(entry.name for entry in entries if entry.run_ttl_ms)
    if guarded and store_url.startswith("sqlite:"):
        logger.warning(
            "beat: %d entr%s with an overlap guard (%s): their run leases are in the SQLite "
            "store %s, which only workers on this host can reach; a worker on another host "
            "leaves each lease to lapse after hashbeat_running_ttl, so its runs may overlap: "
            "use a Redis store (hashbeat_store_url) shared by beats and workers",
            len(guarded),
            "y" if len(guarded) == 1 else "ies",
            ", ".join(guarded[:5]) + (", ..." if len(guarded) > 5 else ""),
            store_url,
        )


class Overlaps:
    """The overlap guard's decisions and what they leave behind: the task a ``replace`` slot
    revokes, and the slots not sent because a run was still going, counted always and logged
    when a run of them starts and when the entry runs again."""

    def __init__(self, on_skip: Callable[[str, int, str], None] = lambda *_: None) -> None:
        #: Told of each skipped slot: entry, slot, the task whose run it would have overlapped.
        self.on_skip = on_skip
        #: Entry -> the task the slot now being sent replaces, to revoke before sending it.
        self.replacing: dict[str, str] = {}
        #: Entry -> slots skipped since it last ran.
        self.skipping: dict[str, int] = {}
        #: Entry -> slots skipped since this beat started.
        self.skipped_total: dict[str, int] = {}
        #: Entry -> the slot waiting for the previous run to end (``buffer_one``).
        self.waiting: dict[str, int] = {}

    def verdict(self, entry: Entry, slot: int, claimed: Claimed) -> Verdict:
        """What becomes of ``entry``'s due ``slot``, by the claim's answer and the entry's
        ``overlap``."""
        holder = claimed.held.get(entry.name)
        if holder is not None and entry.overlap == "buffer_one":
            self.wait(entry, slot, holder)
            return Verdict.WAIT
        if entry.name in claimed and (holder is None or entry.overlap == "replace"):
            self.ran(entry, slot)
            if holder is not None:
                self.replacing[entry.name] = holder
            return Verdict.SEND
        if holder is not None:
            self.skipped(entry, slot, holder)
        return Verdict.MOVE_ON

    def skipped(self, entry: Entry, slot: int, holder: str) -> None:
        self._count(entry.name, slot, holder)
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
            self._count(entry.name, before, holder)

    def ran(self, entry: Entry, slot: int) -> None:
        """``entry``'s ``slot`` was claimed to run: report the skips that came before it."""
        waited = self.waiting.pop(entry.name, None)
        if waited is not None and waited != slot:
            self._count(entry.name, waited, "")
        skipped = self.skipping.pop(entry.name, 0)
        if skipped:
            logger.warning(
                "beat: %s runs again at slot %s after %d skipped slot(s)",
                entry.name,
                slot_iso(slot),
                skipped,
            )

    def _count(self, name: str, slot: int, holder: str) -> None:
        self.on_skip(name, slot, holder)
        self.skipping[name] = self.skipping.get(name, 0) + 1
        self.skipped_total[name] = self.skipped_total.get(name, 0) + 1
