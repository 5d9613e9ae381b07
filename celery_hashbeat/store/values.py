"""The values the store protocol (store/base.py) hands over and keeps: the lease, fences, run
guards, claims, the roster and heartbeats, with the one Python reading of their stored forms.

A fence is stored as ``<slot>|<token>|<previous>|<fingerprint>``:

- ``token`` is the beat that claimed ``slot``; empty for an *anchor* (an instant recorded when a
  leader first saw the entry, so its slots are counted from there; nothing was sent), and ``-``
  for a claim whose claimer is unknown (a claim restored by a give-back);
- ``previous`` is what a give-back restores: empty (nothing), ``<slot>`` (a claimed slot) or
  ``a<ms>`` (an anchor);
- a bare ``<slot>`` (the format of release 0.1) reads as a claim by an unknown beat.

Beside each fence the store keeps the entry's *run count*: how many slots of it have been claimed
(and not given back), so that ``total_run_count`` survives restarts and failovers. A claim adds
one, a give-back takes it back, ``forget`` drops it, an anchor keeps it; it lives outside the fence
value (a hash of its own in Redis, a column in SQLite), so fences of every release still parse and
a release that does not know the count leaves it alone.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LeaseInfo:
    """Who holds the lease now, and for how much longer."""

    token: str
    ttl_left_ms: int


@dataclass(frozen=True)
class Fence:
    """What the store knows of one entry: the last slot claimed, or the anchor it counts from."""

    slot: int
    #: The beat that claimed ``slot``; "" for an anchor, "-" when unknown.
    token: str
    #: The schedule the slot belongs to, as the scheduler fingerprints it; None if not recorded.
    fingerprint: str | None
    #: How many slots of the entry were claimed and not given back (0 if never counted); kept
    #: beside the fence, not part of it, so it takes no part in comparing fences.
    runs: int = field(default=0, compare=False)

    @property
    def anchor(self) -> bool:
        """True when nothing was sent: ``slot`` only marks where the entry's slots start."""
        return self.token == ""


@dataclass(frozen=True)
class RunGuard:
    """What a guarded claim asks for (docs/design.md §12): the run lease for ``task_id`` for
    ``ttl_ms``, and what to do if another task holds it: ``skip`` (claim the slot and leave the
    lease), ``buffer_one`` (claim nothing, so the slot can be claimed once the lease is free) or
    ``replace`` (claim the slot and take the lease over)."""

    mode: str
    task_id: str
    ttl_ms: int


class Claimed(set[str]):
    """The entries whose slot a claim fenced; ``held`` maps each guarded entry whose run lease
    another task held to that task's id."""

    def __init__(self, claimed: Iterable[str] = (), held: Mapping[str, str] | None = None) -> None:
        super().__init__(claimed)
        self.held: dict[str, str] = dict(held or {})


@dataclass(frozen=True)
class Roster:
    """The worker nodes the leader found alive, and when (UTC epoch ms)."""

    nodes: tuple[str, ...]
    resolved_ms: int


def format_roster(nodes: Iterable[str], resolved_ms: int) -> str:
    """The stored form of a roster: ``<resolved ms>|<JSON list of nodes>``, sorted."""
    return f"{int(resolved_ms)}|{json.dumps(sorted(set(nodes)))}"


def parse_roster(value: str) -> Roster | None:
    """A stored roster, or None if it does not parse (the next resolution overwrites it)."""
    resolved, _, text = value.partition("|")
    try:
        nodes = json.loads(text)
    except ValueError:
        return None
    if not resolved.isdigit() or not isinstance(nodes, list):
        return None
    if not all(isinstance(node, str) for node in nodes):
        return None
    return Roster(tuple(nodes), int(resolved))


@dataclass(frozen=True)
class BeatInfo:
    """A beat process seen recently, as its last heartbeat described it."""

    token: str
    last_seen_ms: int
    role: str
    #: A digest of the schedule this beat runs ("" if it did not say), so that beats of different
    #: apps sharing one prefix can notice each other.
    schedule_digest: str = ""


def parse_stored(value: str) -> tuple[Fence, str] | None:
    """A stored fence value and the ``previous`` a give-back restores, or None if it does not
    parse. The one Python reading of the format; the Redis scripts' ``parse`` mirrors it, so a
    value is readable in both languages or in neither."""
    if _digits(value):
        return Fence(int(value), "-", None), ""
    fields = value.split("|", 3)
    if len(fields) != 4 or not _digits(fields[0]):
        return None
    slot, token, previous, fingerprint = fields
    if previous and not _digits(previous.removeprefix("a")):
        return None  # a give-back could not restore it: the whole value is suspect
    return Fence(int(slot), token, fingerprint or None), previous


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()
