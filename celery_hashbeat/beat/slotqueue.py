"""The leader's queue: every entry by its next slot, as a heap of plain numbers and names.

A full pass of Python's collector walks every object it tracks. A heap of ``(slot, order, entry)``
tuples is a million tracked objects at a million entries, and every slot sent puts a new one in
it: passes grew to a second within a minute of slots. Here an item is ``(due, order, name)``,
all atomic values, which the collector stops tracking the first time it looks at it, and the heap's
list is made before the schedule is built and frozen with it (``collector.building``), so the
queue costs the collector's passes nothing at any size.

An item finds its entry by name and is current only while that name still holds the entry that
pushed it (``order`` tells them apart): an entry replaced or removed meanwhile leaves behind
items that are dropped when they come up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from celery_hashbeat.entries.entry import Entry


class SlotQueue:
    """A min-heap of entries by when they are next due (epoch ms)."""

    def __init__(self, entries: Mapping[str, Entry]) -> None:
        self._entries = entries
        self._heap: list[tuple[int, int, str]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def head(self) -> int | None:
        """When the first item is due (epoch ms), or None if the queue is empty."""
        return self._heap[0][0] if self._heap else None

    def push(self, entry: Entry, due_ms: int) -> None:
        heappush(self._heap, (due_ms, entry.order, entry.name))

    def refill(self, items: Iterable[tuple[Entry, int]]) -> None:
        """Replace the whole queue with ``items`` (entry, due in epoch ms), in place: the list
        stays the frozen one."""
        self._heap[:] = [(due_ms, entry.order, entry.name) for entry, due_ms in items]
        heapify(self._heap)

    def pop(self) -> Entry | None:
        """Take the first item off; its entry, or None if it was replaced or removed since."""
        _, order, name = heappop(self._heap)
        return self._current(order, name)

    def upcoming(self, after: int, until: int) -> list[tuple[Entry, int]]:
        """The entries (with their slots) due in ``(after, until]``, without popping: below an
        item due later than ``until`` there is none earlier."""
        heap, found = self._heap, []
        size = len(heap)
        stack = [0] if size else []
        while stack:
            index = stack.pop()
            due, order, name = heap[index]
            if due > until:
                continue
            entry = self._current(order, name) if due > after else None
            if entry is not None and entry.slot is not None and entry.active:
                found.append((entry, entry.slot))
            stack.extend(child for child in (2 * index + 1, 2 * index + 2) if child < size)
        return found

    def _current(self, order: int, name: str) -> Entry | None:
        entry = self._entries.get(name)
        return entry if entry is not None and entry.order == order else None
