"""The record of sent slots (docs/design.md §5, §19): which slots of each entry were claimed.

A fence keeps the last claim only, so beside the fences each store records every claimed
(entry, slot), written by the claim that fences it, dropped by the give-back that undoes it and
kept by a hand-over. It is what lets a backfill send the slots of a past range that nobody sent,
and never one that somebody did. A slot in the record is claimed once: a regular claim of a
recorded slot is refused as a claim at or past the fence is, and a backfill claims only slots
not recorded.

The record is bounded by age (SENT_KEEP_MS, by slot time), and in Redis also by count (SENT_CAP,
oldest slots first), so its cost stays bounded however many entries fire how often. What it can
tell begins at its *horizon*: the newest of when recording began (the first claim that recorded,
by the store's clock), now less SENT_KEEP_MS, and just after the oldest slot kept once the count
cap trimmed. A slot before the horizon is unknowable: a backfill refuses it.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field

#: How long a claimed slot is recorded, by its slot time (ms): how far back a backfill can know.
SENT_KEEP_MS = 7 * 24 * 3_600_000

#: The most slots the Redis store records (its memory is what the record costs): at about a
#: hundred bytes each, some 50 MB at most.
SENT_CAP = 500_000

#: The most slots a backfill claims in one store call.
SENT_CHUNK = 1_000

#: How long the Redis store remembers which backfill claim recorded a slot (ms): enough for the
#: request to come round again after a lost reply, even across a failover.
CLAIMER_KEEP_MS = 24 * 3_600_000


@dataclass(frozen=True)
class Recorded:
    """What the record says of some slots of one entry: those recorded as sent, and the horizon
    (ms) before which it cannot tell."""

    horizon_ms: int
    sent: frozenset[int] = field(default_factory=frozenset)


@dataclass(frozen=True)
class SlotClaim:
    """A backfill's claim of some slots of one entry: those it claimed (now recorded), those
    recorded already (sent before), and the horizon; a slot before it was neither."""

    horizon_ms: int
    claimed: tuple[int, ...] = ()
    sent: tuple[int, ...] = ()


def horizon(since_ms: int | None, now_ms: int, oldest_kept_ms: int | None = None) -> int:
    """Where the record begins to know: ``since_ms`` is when recording began (None: never, so
    it knows from now on), ``oldest_kept_ms`` the oldest slot kept once the count cap trimmed."""
    start = now_ms if since_ms is None else since_ms
    return max(start, now_ms - SENT_KEEP_MS, -1 if oldest_kept_ms is None else oldest_kept_ms + 1)


def plan_slots(
    slots: Sequence[int],
    recorded: frozenset[int] | set[int],
    horizon_ms: int,
    mine: frozenset[int] | set[int] = frozenset(),
) -> SlotClaim:
    """The claim of ``slots`` (one entry's) over the ``recorded`` ones: each at or after the
    horizon and not recorded, or recorded by this same claimer (``mine``), is claimed, once,
    oldest first."""
    wanted = sorted({int(slot) for slot in slots if slot >= horizon_ms})
    claimed = tuple(slot for slot in wanted if slot not in recorded or slot in mine)
    sent = tuple(slot for slot in wanted if slot in recorded and slot not in mine)
    return SlotClaim(horizon_ms, claimed, sent)


class SentRecords(abc.ABC):
    """The backfill half of the store protocol: reading and claiming the record of sent slots.
    The regular claims write it themselves (``Store.claim``, ``unclaim``)."""

    @abc.abstractmethod
    def recorded(self, entry: str, slots: Sequence[int]) -> Recorded:
        """Which of ``slots`` of ``entry`` are recorded as sent, and the horizon. Not
        lease-checked: it only reads (a dry run)."""

    @abc.abstractmethod
    def claim_slots(
        self, token: str, entry: str, slots: Sequence[int], *, claimer: str
    ) -> SlotClaim | None:
        """Claim past slots of ``entry`` for a backfill, in one atomic step, only while ``token``
        holds the lease (None otherwise): each slot at or after the horizon and not recorded is
        recorded as ``claimer``'s and claimed. A slot recorded by the same ``claimer`` is claimed
        again: the claimer asks again only when it never heard the answer, so it sent none of
        them (beat/backfill.py). The entry's fence is left alone."""

    @abc.abstractmethod
    def unclaim_slots(
        self, token: str, entry: str, slots: Sequence[int], *, claimer: str
    ) -> set[int]:
        """Give back ``claimer``'s claims whose publish surely failed, only while ``token`` holds
        the lease: their records go, so a later backfill sends them. Returns those given back."""
