"""What an entry promises its operators (docs/design.md §19): ``max_lateness`` (seconds: a send
later than this after its slot counts as late), ``alert_after_failures`` (n: the run of failures
at which its alert fires) and ``pause_after_failures`` (n: the run of failures at which the
leader pauses it). Read from a definition, the same keys in beat_schedule and in a stored entry;
an entry that sets none has None, and costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from celery_hashbeat.entries.errors import EntryError

#: The longest run of failures counted: each run leaves three records (sent, started, failed)
#: in a history that keeps the newest 100 (store/base.py HISTORY_CAP).
MAX_FAILURES = 30

#: The definition keys of the promises.
PROMISE_KEYS = frozenset({"max_lateness", "alert_after_failures", "pause_after_failures"})


@dataclass(frozen=True)
class Promises:
    """An entry's promises; None where it makes none."""

    max_lateness_ms: int | None = None
    alert_after_failures: int | None = None
    pause_after_failures: int | None = None

    @property
    def failures_watched(self) -> int | None:
        """The longest run of failures anything waits for (how much history to read)."""
        counts = [n for n in (self.alert_after_failures, self.pause_after_failures) if n]
        return max(counts) if counts else None


def promises_of(name: str, definition: Mapping[str, Any]) -> Promises | None:
    """The promises a definition makes, checked; None when it makes none."""
    if PROMISE_KEYS.isdisjoint(definition):
        return None
    lateness = definition.get("max_lateness")
    if lateness is not None and (
        isinstance(lateness, bool) or not isinstance(lateness, int | float) or not lateness > 0
    ):
        raise EntryError(
            f"entry {name!r}: 'max_lateness' must be a number of seconds above 0 (60 for a "
            f"minute), not {lateness!r}"
        )
    counts = {}
    for key in ("alert_after_failures", "pause_after_failures"):
        value = definition.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_FAILURES
        ):
            raise EntryError(
                f"entry {name!r}: {key!r} must be a whole number of runs from 1 to "
                f"{MAX_FAILURES} (3: after three failures in a row), not {value!r}"
            )
        counts[key] = value
    promises = Promises(
        None if lateness is None else round(lateness * 1000),
        counts["alert_after_failures"],
        counts["pause_after_failures"],
    )
    return None if promises == Promises() else promises


def promise_keys(promises: Promises | None) -> dict[str, Any]:
    """The definition keys that make ``promises`` (none for None), to hand an entry back."""
    if promises is None:
        return {}
    found: dict[str, Any] = {}
    if promises.max_lateness_ms is not None:
        found["max_lateness"] = promises.max_lateness_ms / 1000
    for key in ("alert_after_failures", "pause_after_failures"):
        if getattr(promises, key) is not None:
            found[key] = getattr(promises, key)
    return found
