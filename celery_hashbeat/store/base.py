"""The coordination protocol every store implements (DESIGN.md §5).

The store holds everything the beats share: the leader lease, the last slot enqueued per entry
(the fence), and a heartbeat per beat. It knows nothing of Celery or of the scheduler: it deals in
tokens, entry names and slots (UTC epoch milliseconds). Each method that changes more than one
thing does it atomically (one Lua script in Redis, one ``BEGIN IMMEDIATE`` in SQLite).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


class StoreError(Exception):
    """The store could not answer; nothing was changed that the caller must undo."""


class StoreUnavailable(StoreError):  # noqa: N818 - the protocol's published name
    """The store is unreachable or not answering: retry later (with backoff)."""


class StoreAuthError(StoreError):
    """The store refused the credentials: retrying will not help until the settings change."""


class StoreConfigError(ValueError):
    """The store URL or options are malformed; the message names the setting and the fix."""


@dataclass(frozen=True)
class LeaseInfo:
    """Who holds the lease now, and for how much longer."""

    token: str
    ttl_left_ms: int


@dataclass(frozen=True)
class BeatInfo:
    """A beat process seen recently, as its last heartbeat described it."""

    token: str
    last_seen_ms: int
    role: str


class Store(abc.ABC):
    """One protocol, two implementations: Redis for HA, SQLite for one host."""

    url: str  # the store's URL with any password masked: safe to log

    @abc.abstractmethod
    def acquire(self, token: str, ttl_ms: int) -> bool:
        """Take the lease if nobody holds it (set-if-absent with TTL).

        True if ``token`` holds it afterwards; a holder asking again keeps its lease unextended.
        """

    @abc.abstractmethod
    def renew(self, token: str, ttl_ms: int) -> bool:
        """Extend the lease only if ``token`` still holds it. False means: step down at once."""

    @abc.abstractmethod
    def release(self, token: str) -> bool:
        """Drop the lease only if ``token`` holds it, so a standby takes over at once."""

    @abc.abstractmethod
    def leader(self) -> LeaseInfo | None:
        """The current lease holder, or None when the lease is free."""

    @abc.abstractmethod
    def claim(self, token: str, slots: Mapping[str, int]) -> dict[str, int | None]:
        """Fence a tick's due slots in one atomic step.

        For each (entry, slot): claimed only if ``token`` holds the lease and ``slot`` is later
        than the entry's stored slot; then the stored slot becomes ``slot``. Returns the claimed
        entries, each mapped to the slot it replaced (None if it had none), so that a failed
        publish can give the claim back. Nothing is claimed when the lease is not held.
        """

    @abc.abstractmethod
    def unclaim(self, token: str, entry: str, slot: int, previous: int | None) -> bool:
        """Give back a claim whose publish failed: restore ``previous`` if the stored slot is
        still ``slot`` and ``token`` still holds the lease."""

    @abc.abstractmethod
    def last_slots(self, entries: Iterable[str] | None = None) -> dict[str, int]:
        """The last slot enqueued per entry (all entries when ``entries`` is None)."""

    @abc.abstractmethod
    def forget(self, entries: Iterable[str]) -> None:
        """Drop the fence of entries removed from the schedule."""

    @abc.abstractmethod
    def heartbeat(self, token: str, role: str, ttl_ms: int) -> None:
        """Record that beat ``token`` is alive in ``role``; it is forgotten after ``ttl_ms``."""

    @abc.abstractmethod
    def beats(self) -> list[BeatInfo]:
        """The beats seen within their heartbeat TTL, most recent first."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Raise StoreUnavailable or StoreAuthError unless the store answers."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the store object is not used afterwards."""
