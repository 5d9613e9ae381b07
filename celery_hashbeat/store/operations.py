"""What the store keeps for operators beside the controls (docs/design.md §19): the audit trail
of their changes and the schedules the beats run, by digest.

Both are opaque text to the store (JSON written and read by ``celery_hashbeat.control.audit``
and ``celery_hashbeat.control.running``), neither is lease-checked, since an operator writes the
trail whether or not a beat runs and every beat, leader or standby, says what it runs:

- the *audit trail*: one record per operator change, stamped with the store's own clock on the
  way in, kept in the order they arrived, bounded by count and by age (each write drops what
  is past either bound, in the same atomic step);
- the *running schedules*: per schedule digest (the one a beat's heartbeat carries), the
  definitions that beat runs, so that ``hashbeat plan`` compares a deploy candidate with what
  really runs; the newest ``SCHEDULES_KEPT`` digests are kept.
"""

from __future__ import annotations

import abc

#: The most audit records kept; the oldest go first.
AUDIT_KEEP = 10_000
#: How long an audit record is kept: 400 days, as a history.
AUDIT_KEEP_MS = 400 * 24 * 3600 * 1000
#: How many schedule digests keep their definitions (a deploy has two or three at once).
SCHEDULES_KEPT = 20


class OperatorRecords(abc.ABC):
    """The operators' half of the store protocol: the audit trail and the running schedules."""

    @abc.abstractmethod
    def write_audit(self, record: str, keep: int = AUDIT_KEEP, keep_ms: int = AUDIT_KEEP_MS) -> int:
        """Append ``record`` to the audit trail, then drop the records beyond the newest
        ``keep`` and those older than ``keep_ms``, in one atomic step. Returns when the store
        took it (its own clock, epoch ms)."""

    @abc.abstractmethod
    def audit_trail(self, limit: int = AUDIT_KEEP) -> list[tuple[int, str]]:
        """The newest ``limit`` audit records, newest first, each with when the store took it
        (epoch ms)."""

    @abc.abstractmethod
    def record_schedule(self, digest: str, definitions: str) -> None:
        """Keep ``definitions`` as what the beats whose heartbeat says ``digest`` run (replacing
        what that digest held); only the newest SCHEDULES_KEPT digests stay."""

    @abc.abstractmethod
    def schedules(self) -> dict[str, str]:
        """Every kept digest's definitions."""
