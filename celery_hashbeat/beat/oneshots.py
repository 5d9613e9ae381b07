"""Done one-shots leave the store (docs/design.md §21).

A one-shot kept in the store (``ScheduleAdmin.add(at=...)``, ``hashbeat add --at``) stays there,
done, for ``DONE_RETENTION_MS`` after its instant, so that ``hashbeat show`` and the history say
what became of it; then the leader removes its definition, as ``hashbeat remove`` would. Only the
one-shots this beat found done are looked at, oldest first: an idle tick costs one comparison.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Collection

from celery_hashbeat._logs import SCHEDULER
from celery_hashbeat.beat.storecalls import FAILED, StoreCalls
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.entries.oneshot import DONE_RETENTION_MS, OnceSlots
from celery_hashbeat.store.controls import DEFINITION, PAUSE

logger = SCHEDULER


class DoneOnce:
    """The one-shots found done, by instant, until their retention has passed."""

    def __init__(self) -> None:
        self._done: list[tuple[int, str]] = []
        self._seen: set[str] = set()

    def note(self, entry: Entry) -> None:
        """Remember ``entry`` if it is a one-shot (it has just run out of slots)."""
        source = entry.source
        if isinstance(source, OnceSlots) and entry.name not in self._seen:
            self._seen.add(entry.name)
            heapq.heappush(self._done, (source.instant, entry.name))

    def prune(self, now_ms: int, stored: Collection[str], calls: StoreCalls) -> None:
        """As leader, remove from the store the one-shots done longer ago than the retention
        (those of beat_schedule stay: the configuration owns them)."""
        done = self._done
        while done and done[0][0] + DONE_RETENTION_MS < now_ms:
            name = done[0][1]
            if name in stored:
                removed = calls.attempt(
                    calls.store.edit, name, {DEFINITION: None, PAUSE: None}, True
                )
                if removed is FAILED:
                    return  # tried again at the next poll
                logger.log(
                    logging.INFO,
                    "beat: removed the done one-shot %r from the store (its slot is older than "
                    "the %d-day retention)",
                    name,
                    DONE_RETENTION_MS // 86_400_000,
                )
            heapq.heappop(done)
            self._seen.discard(name)
