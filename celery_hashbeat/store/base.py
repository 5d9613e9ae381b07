"""The coordination protocol every store implements (docs/design.md §5).

The store holds everything the beats share: the leader lease, the last slot claimed per entry
(the fence, which also says who claimed it and for which schedule), and a heartbeat per beat. It
knows nothing of Celery or of the scheduler: it deals in tokens, entry names, slots (UTC epoch
milliseconds) and schedule fingerprints (short opaque text). Each method that changes shared state
checks the caller's lease and does it atomically (one Lua script in Redis, one ``BEGIN IMMEDIATE``
in SQLite, one transaction that locks the lease row in PostgreSQL). A stored value that does not
parse is logged once and treated as absent.

The values it passes and keeps (fences, leases, run guards, rosters) are in store/values.py, its
errors in store/errors.py.

Two more things live beside the fences (docs/design.md §11-12): an entry's *run lease*, the id of
the task now queued or running for it, with a TTL (taken by a guarded claim, then kept alive and
released by the worker that runs the task, owner-checked by task id), and the *roster*, the
worker nodes the leader last found alive, so that every beat fans entries out alike.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence

from celery_hashbeat._logs import STORE
from celery_hashbeat._outage import Once
from celery_hashbeat.store.controls import Changes, ControlRecords, Taken
from celery_hashbeat.store.operations import AUDIT_KEEP, AUDIT_KEEP_MS, OperatorRecords
from celery_hashbeat.store.sent import Recorded, SentRecords, SlotClaim
from celery_hashbeat.store.values import (
    BeatInfo,
    Claimed,
    Fence,
    LeaseInfo,
    Roster,
    RunGuard,
    format_roster,
    parse_roster,
    parse_stored,
)

logger = STORE

#: The most outcomes kept per entry's history; older ones are dropped as new ones come in.
HISTORY_CAP = 100

#: How long the store keeps a claim that another beat's later claim moved past (ms): its claimer
#: can hand the slot over (``hand_over``) if it comes back within this time (docs/design.md §5).
HANDOVER_KEEP_MS = 3_600_000

#: (entry, record) pairs, oldest first, to append to the entries' histories.
History = Sequence[tuple[str, str]]


class Store(ControlRecords, OperatorRecords, SentRecords, abc.ABC):
    """One protocol, three implementations: Redis for HA, SQLite for one host, PostgreSQL for
    the shops whose shared server it is.

    The runtime controls (stored entries, pauses, triggers, store/controls.py) are each store's
    ControlRecords object, given here; the ControlRecords methods below hand over to it, so that
    callers keep one object to talk to. So are the operators' records (the audit trail and the
    running schedules, store/operations.py), each store's OperatorRecords object; and the
    backfills' side of the record of sent slots (store/sent.py), its SentRecords object (the
    claims below write the record too).
    """

    def __init__(
        self,
        url: str,
        records: ControlRecords,
        operations: OperatorRecords,
        sent: SentRecords,
    ) -> None:
        #: The store's URL with any password masked: safe to log.
        self.url = url
        self._records = records
        self._operations = operations
        self._sent = sent
        #: The (entry, value) pairs already logged as unreadable, so each is logged once.
        self._unreadable = Once()

    def edit(
        self, name: str, values: Mapping[str, str | None], require: bool | None = None
    ) -> int | None:
        return self._records.edit(name, values, require)

    def swap_definition(self, name: str, expected: str, definition: str) -> int | None:
        return self._records.swap_definition(name, expected, definition)

    def changes(self, since: int) -> Changes:
        return self._records.changes(since)

    def controls_of(self, name: str) -> tuple[str | None, str | None]:
        return self._records.controls_of(name)

    def ask(self, trigger: str) -> int:
        return self._records.ask(trigger)

    def triggers(self) -> list[str]:
        return self._records.triggers()

    def take_triggers(self, token: str) -> Taken:
        return self._records.take_triggers(token)

    def give_back_triggers(self, token: str, triggers: Sequence[str]) -> bool:
        return self._records.give_back_triggers(token, triggers)

    def write_audit(self, record: str, keep: int = AUDIT_KEEP, keep_ms: int = AUDIT_KEEP_MS) -> int:
        return self._operations.write_audit(record, keep, keep_ms)

    def audit_trail(self, limit: int = AUDIT_KEEP) -> list[tuple[int, str]]:
        return self._operations.audit_trail(limit)

    def record_schedule(self, digest: str, definitions: str) -> None:
        self._operations.record_schedule(digest, definitions)

    def schedules(self) -> dict[str, str]:
        return self._operations.schedules()

    def recorded(self, entry: str, slots: Sequence[int]) -> Recorded:
        return self._sent.recorded(entry, slots)

    def claim_slots(
        self, token: str, entry: str, slots: Sequence[int], *, claimer: str
    ) -> SlotClaim | None:
        if not claimer:
            # '' is the regular claims' in the SQL stores' records: it would take their slots.
            raise ValueError("a backfill's claim needs a claimer of its own, not ''")
        return self._sent.claim_slots(token, entry, slots, claimer=claimer)

    def unclaim_slots(
        self, token: str, entry: str, slots: Sequence[int], *, claimer: str
    ) -> set[int]:
        return self._sent.unclaim_slots(token, entry, slots, claimer=claimer)

    def _parse_fences(
        self, stored: Iterable[tuple[str, str]], counts: Mapping[str, int] | None = None
    ) -> dict[str, Fence]:
        """Parse stored fence values, with their run counts; one that does not parse is logged
        once and left out (the next claim or anchor of its entry overwrites it)."""
        return {entry: fence for entry, (fence, _) in self._parse_stored(stored, counts).items()}

    def _parse_stored(
        self, stored: Iterable[tuple[str, str]], counts: Mapping[str, int] | None = None
    ) -> dict[str, tuple[Fence, str]]:
        """Like ``_parse_fences``, each fence with its ``previous`` (for a give-back)."""
        fences: dict[str, tuple[Fence, str]] = {}
        for entry, value in stored:
            parsed = parse_stored(value)
            if parsed is not None:
                count = counts.get(entry) if counts else None
                if count:
                    fence = parsed[0]
                    parsed = Fence(fence.slot, fence.token, fence.fingerprint, count), parsed[1]
                fences[entry] = parsed
                continue
            if self._unreadable.first((entry, value)):
                logger.warning(
                    "store %s: the fence of entry %r is %r, which is not a fence; skipping it "
                    "(the entry is treated as never sent, and its next claim overwrites it)",
                    self.url,
                    entry,
                    value,
                )
        return fences

    @abc.abstractmethod
    def acquire(self, token: str, ttl_ms: int) -> bool:
        """Take the lease if nobody holds it (set-if-absent with TTL).

        True if ``token`` holds it afterwards; a holder asking again keeps its lease unextended.
        """

    @abc.abstractmethod
    def renew(self, token: str, ttl_ms: int, history: History = ()) -> bool:
        """Extend the lease only if ``token`` still holds it. False means: step down at once.
        ``history`` is recorded as ``record`` would, in the same round trip, whatever the
        answer."""

    @abc.abstractmethod
    def release(self, token: str) -> bool:
        """Drop the lease only if ``token`` holds it, so a standby takes over at once."""

    @abc.abstractmethod
    def leader(self) -> LeaseInfo | None:
        """The current lease holder, or None when the lease is free."""

    @abc.abstractmethod
    def claim(
        self,
        token: str,
        slots: Mapping[str, tuple[int, str]],
        runs: Mapping[str, RunGuard] | None = None,
        history: History = (),
    ) -> Claimed:
        """Fence a tick's due slots in one atomic step; ``slots`` maps entry -> (slot, fingerprint).

        Nothing is claimed unless ``token`` holds the lease. Then each entry is claimed when its
        slot is later than the stored fence (or no fence parses), and also when the stored fence
        is this very slot claimed by this very token: a caller whose earlier reply was lost
        recognises its own claim; a slot recorded as sent (store/sent.py) is not claimed again.
        A claim stores ``slot|token|previous|fingerprint``, records the slot as sent and adds
        one to the entry's run count (a retry of its own claim adds nothing). An entry
        in ``runs`` is claimed with its run lease, as its RunGuard says. Returns the claimed
        entries, with the run leases found held by other tasks. ``history`` is recorded as
        ``record`` would, in the same round trip, whether or not the lease is held.
        """

    @abc.abstractmethod
    def unclaim(
        self, token: str, slots: Mapping[str, int], runs: Mapping[str, str] | None = None
    ) -> set[str]:
        """Give back claims whose publish failed, in one atomic step; ``slots`` maps entry ->
        slot. Each fence that is still exactly that slot claimed by ``token`` is restored to its
        ``previous`` (or removed), provided ``token`` still holds the lease; ``runs`` maps
        entries to the task ids whose run leases go too (where that task still holds them).
        The run count of each entry given back loses the one its claim added, and its slot's
        record as sent goes. Returns the entries given back."""

    @abc.abstractmethod
    def hand_over(self, token: str, slots: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        """Hand over (entry, slot) pairs that ``token`` claimed and surely did not send, for
        whichever beat leads to send (docs/design.md §5). Needs no lease: a beat that lost its
        lease still knows what it did not send. A slot is handed over only if the store shows
        that ``token`` claimed it: the entry's fence is that claim, or a later claim by another
        beat moved past it less than HANDOVER_KEEP_MS ago. The proof is used up in the same
        step, so each claim is handed over once. Returns the pairs handed over."""

    @abc.abstractmethod
    def take_handed(self, token: str) -> list[tuple[str, int]]:
        """Take every slot handed over, only while ``token`` holds the lease (none otherwise),
        oldest slot first. Each is recorded as the taker's claim, so that a taker whose publish
        surely failed can hand it over again."""

    @abc.abstractmethod
    def anchor(self, token: str, anchors: Mapping[str, tuple[int, str]]) -> dict[str, Fence]:
        """Record where entries' slots start; ``anchors`` maps entry -> (instant, fingerprint).

        Under the lease, an entry whose fence is missing, does not parse, or carries another
        (non-None) fingerprint gets the anchor ``instant||previous|fingerprint``; any other fence
        is kept. Returns the fence of every given entry after the call (empty without the lease).
        """

    @abc.abstractmethod
    def fences(self, entries: Iterable[str] | None = None) -> dict[str, Fence]:
        """The fences of ``entries`` (all when None); values that do not parse are skipped."""

    def last_slots(self, entries: Iterable[str] | None = None) -> dict[str, int]:
        """The last slot claimed per entry; anchors (nothing sent) are left out."""
        fences = self.fences(entries)
        return {name: fence.slot for name, fence in fences.items() if not fence.anchor}

    @abc.abstractmethod
    def forget(self, token: str, entries: Iterable[str]) -> bool:
        """Drop the fences (and run counts) of entries removed from the schedule, only while
        ``token`` holds the lease (a deposed leader must not delete a live leader's fences).
        True if it did."""

    @abc.abstractmethod
    def hold_run(self, entry: str, task_id: str, ttl_ms: int) -> bool:
        """Take ``entry``'s run lease for ``task_id`` when it is free or already this task's
        (a worker starting the task); False if another task holds it."""

    @abc.abstractmethod
    def renew_runs(self, runs: Mapping[str, str], ttl_ms: int) -> set[str]:
        """Extend the run leases of ``runs`` (entry -> task id) still held by those tasks, in
        one step; returns the entries renewed."""

    @abc.abstractmethod
    def release_run(self, entry: str, task_id: str) -> bool:
        """Drop ``entry``'s run lease only if ``task_id`` holds it (a run that ended)."""

    @abc.abstractmethod
    def running(self, entries: Iterable[str] | None = None) -> dict[str, str]:
        """The live run leases of ``entries`` (all when None): entry -> task id."""

    @abc.abstractmethod
    def shared(self, name: str) -> str | None:
        """The document ``name`` that a leader keeps for every beat (``roster``, ``balance``),
        or None if none was ever written."""

    @abc.abstractmethod
    def share(self, token: str, name: str, value: str) -> bool:
        """Write the document ``name``, only while ``token`` holds the lease. True if it did."""

    def roster(self) -> Roster | None:
        """The worker nodes last recorded by a leader, or None (never, or unreadable)."""
        value = self.shared("roster")
        return None if value is None else parse_roster(value)

    def set_roster(self, token: str, nodes: Iterable[str], resolved_ms: int) -> bool:
        """Record the live worker nodes, only while ``token`` holds the lease. True if it did."""
        return self.share(token, "roster", format_roster(nodes, resolved_ms))

    @abc.abstractmethod
    def record(self, history: History) -> None:
        """Append each (entry, record) to that entry's history, keeping its newest HISTORY_CAP.
        Not lease-checked: a history says what happened, whoever saw it happen."""

    @abc.abstractmethod
    def history(self, entry: str, limit: int = HISTORY_CAP) -> list[str]:
        """The newest ``limit`` records of ``entry``'s history, newest first."""

    @abc.abstractmethod
    def heartbeat(self, token: str, role: str, ttl_ms: int, schedule_digest: str = "") -> None:
        """Record that beat ``token`` is alive in ``role`` running the schedule
        ``schedule_digest``; it is forgotten after ``ttl_ms``."""

    @abc.abstractmethod
    def beats(self) -> list[BeatInfo]:
        """The beats seen within their heartbeat TTL, most recent first."""

    @abc.abstractmethod
    def ping(self) -> None:
        """Raise StoreUnavailable or StoreAuthError unless the store answers."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections; the store object is not used afterwards."""
