"""Which slots to get ready before they are due, and when to wake up to do it.

At a slot, the leader claims it and then publishes it; whatever it does in between makes the slot
late. Most of that is building the message (the entry's plan, the first time, and the message),
which depends only on the entry and the slot, so it can be done before: the leader wakes
``WINDOW_MS`` before the next slot, makes the messages of the slots due by then, and sleeps until
the slot, when only claiming and sending are left. Nothing is claimed or sent early.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from celery_hashbeat.entries.entry import Entry


class Upcoming(Protocol):
    """The beat's slot queue, as far as making messages ahead reads it."""

    def upcoming(self, after: int, until: int) -> list[tuple[Entry, int]]: ...


#: How long before a slot its message is made (ms): room for the first slot of a few hundred
#: entries, whose plans are made then too.
WINDOW_MS = 300

#: Making messages ahead stops this long before the leader wakes for the next slot (ms), so it
#: never delays it.
MARGIN_MS = 2


class Ahead:
    """How far ahead messages were made; what to make next, and when to wake for it."""

    def __init__(self, window_ms: int = WINDOW_MS) -> None:
        self.window_ms = window_ms
        #: Slots up to this instant (epoch ms) had their messages made.
        self.made_to = 0

    def wake_at(self, head: int) -> int:
        """When to wake for the slot at ``head``: early enough to make its message first."""
        return head if head <= self.made_to else head - self.window_ms

    def due(self, head: int, now: int) -> bool:
        """Whether messages are to be made now, for the slot at ``head`` and those with it."""
        return head > self.made_to and head - now <= self.window_ms

    def take(self, queue: Upcoming, now: int) -> list[tuple[Entry, int]]:
        """The slots to make messages for now (in the order they are due), and note them."""
        until = now + self.window_ms
        found = queue.upcoming(self.made_to, until)
        self.made_to = until
        found.sort(key=lambda pair: pair[1])
        return found

    def skip(self, now: int) -> None:
        """Make nothing for the slots due by the end of the window (none can be made)."""
        self.made_to = now + self.window_ms

    def reset(self) -> None:
        """Forget what was made (a new leader, a new connection)."""
        self.made_to = 0
