"""Every Redis key of the store, spelled in this one place.

All keys of a prefix share the hash tag ``{<prefix>}``, so one Redis Cluster slot holds them all
and a script may touch any of them together. A key that a script builds from a prefix it is given
(``{p}:running:<entry>``, ``{p}:history:<entry>``) stays in that slot, since the tag comes first.
Existing data is read under these names: they never change.
"""

from __future__ import annotations


class Keys:
    """The keys of one ``hashbeat_key_prefix``."""

    def __init__(self, prefix: str) -> None:
        tag = f"{{{prefix}}}:"
        self._tag = tag
        #: The leader's token, with the lease TTL as the key's expiry.
        self.leader = tag + "leader"
        #: A hash: entry name -> its fence (``slot|token|previous|fingerprint``, store/values.py).
        self.fired = tag + "fired"
        #: A hash: entry name -> its run count, changed by the scripts that change fences.
        self.runs = tag + "runs"
        #: A hash: beat token -> ``role|last_seen_ms|expires_ms|d<schedule digest>``, in the
        #: server's clock.
        self.beats = tag + "beats"
        #: Before an entry's name: its run lease, the task id, with the run TTL as its expiry.
        self.running_prefix = tag + "running:"
        #: Before an entry's name: a list, its newest outcomes first, trimmed to HISTORY_CAP.
        self.history_prefix = tag + "history:"
        #: The runtime controls (store/controls.py): hashes name -> definition and name -> pause
        #: record; the version, raised by every write; a sorted set, name -> the version of its
        #: last change (names stay after their records go, so a beat still learns of a removal);
        #: a list, the triggers waiting, oldest first.
        self.defs = tag + "defs"
        self.paused = tag + "paused"
        self.version = tag + "version"
        self.changes = tag + "changes"
        self.triggers = tag + "triggers"
        #: What the leader took off that queue and has not settled yet (docs/design.md §19): a
        #: list, oldest first, and the token of the leader that took it last.
        self.taken = tag + "triggers-taken"
        self.taken_by = tag + "triggers-taken-by"
        #: Slots handed over (docs/design.md §5): a sorted set of claims some beat made and
        #: whose fence a later claim by another beat moved past, ``<slot>|<token>|<entry>``
        #: scored by when they were recorded (server ms), kept HANDOVER_KEEP_MS; and a set of
        #: the slots their claimers surely did not send, ``<slot>|<entry>``, for the leader.
        self.claimed = tag + "claimed"
        self.handed = tag + "handed"
        #: Names whose records were all removed, a sorted set: name -> when (server ms); and a
        #: hash whose field "version" is the newest version of a removed name's mark dropped
        #: from ``changes`` (store/retention.py).
        self.removed = tag + "removed"
        self.changes_floor = tag + "changes-floor"
        #: The operators' records (store/operations.py): the audit trail, a list of
        #: ``<server ms>|<record>``, oldest first; and a hash, schedule digest ->
        #: ``<server ms>|<the definitions beats of that digest run>``.
        self.audit = tag + "audit"
        self.schedules = tag + "schedules"
        #: The record of sent slots (store/sent.py): a sorted set of ``<slot>|<entry>`` scored
        #: by the slot (epoch ms), trimmed by age and count; and when recording began (server
        #: ms), written by the first claim that recorded.
        self.sent = tag + "sent"
        self.sent_since = tag + "sent-since"
        #: Which of those a backfill claim recorded: a set of ``<slot>|<entry>`` per claimer,
        #: living CLAIMER_KEEP_MS, so a claim asked again after a lost reply knows its own.
        self._sent_by = tag + "sent-by:"

    def sent_by(self, claimer: str) -> str:
        return self._sent_by + claimer

    def running(self, entry: str) -> str:
        """``entry``'s run lease."""
        return self.running_prefix + entry

    def history(self, entry: str) -> str:
        """``entry``'s history list."""
        return self.history_prefix + entry

    def shared(self, name: str) -> str:
        """A document the leader keeps for every beat: ``roster``
        (``<resolved ms>|<JSON list of worker nodes>``) or ``balance`` (the balanced assignment,
        JSON, docs/design.md §16)."""
        return self._tag + name
