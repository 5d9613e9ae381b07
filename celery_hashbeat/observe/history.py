"""What happened to each entry's slots (docs/design.md §14): one record per outcome, kept in
the store.

A record is one line of JSON, so that any tool can read it: the outcome, the slot (UTC epoch ms),
when it happened, and what else the outcome knows (the sending beat, the task id, the lateness,
the reason of a skip or a drop, a run's duration). The beat writes ``sent``, ``skipped``,
``missed``, ``dropped`` and ``trigger``; the worker that runs a slot's task writes ``started``,
``succeeded`` and ``failed`` (worker/outcomes.py). The store keeps the newest HISTORY_CAP per entry.

Records wait in an Outbox and ride on the next claim or lease renewal, calls the beat makes
anyway; only after a send with no claim due right after does the beat write them at once
(beat/dispatch.py), so that a kill a moment after a send keeps its ``sent`` record. A record that
cannot be delivered (the store is down) is dropped: the history is a report, and the outbox never
grows past OUTBOX_CAP. The store keeps records in the order they arrived; ``newest_first`` orders
them by when each happened.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from celery_hashbeat.store.base import HISTORY_CAP

__all__ = [
    "DROPPED",
    "HISTORY_CAP",
    "OUTBOX_CAP",
    "Outbox",
    "Record",
    "decode",
    "encode",
    "newest_first",
    "sent_text",
]

#: Outcomes the beat records.
SENT, SKIPPED, MISSED, TRIGGER = "sent", "skipped", "missed", "trigger"
#: A slot the broker can never take (an exchange it does not have, arguments that do not
#: serialise): the beat dropped it.
DROPPED = "dropped"
#: Outcomes the worker records.
STARTED, SUCCEEDED, FAILED = "started", "succeeded", "failed"

#: The most records waiting for a store call; older ones are dropped first.
OUTBOX_CAP = 10_000


@dataclass(frozen=True)
class Record:
    """One outcome of one entry. Fields a given outcome does not know are None (or "")."""

    outcome: str
    #: The slot (UTC epoch ms) the outcome is about; None for a trigger.
    slot: int | None
    #: When it happened (UTC epoch ms).
    at: int
    #: The beat (its lease token) or the worker (its node name) that recorded it.
    by: str = ""
    task_id: str = ""
    #: Why a slot was skipped, missed (``overlap``, ``catch_up=skip``...) or dropped.
    reason: str = ""
    #: Publish time minus slot (ms), for ``sent``.
    lateness_ms: int | None = None
    #: How long the task ran (ms), for ``succeeded`` and ``failed``.
    run_ms: int | None = None
    #: How many slots one ``missed`` record stands for (at most CATCH_UP_COUNT_CAP counted).
    count: int | None = None


FIELDS = tuple(field.name for field in fields(Record))


def encode(record: Record) -> str:
    """The record as the store keeps it: compact JSON without the fields it does not know."""
    data = {name: getattr(record, name) for name in FIELDS}
    return json.dumps(
        {name: value for name, value in data.items() if value is not None and value != ""},
        separators=(",", ":"),
    )


def sent_text(slot: int, at: int, by_json: str, task_id: str, lateness_ms: int) -> str:
    """``encode(Record(SENT, slot, at, by, task_id, lateness_ms=lateness_ms))``, written out:
    the one record of every slot sent, so it costs a string format, not a JSON encoding.
    ``by_json`` is the sender already JSON-encoded; ``task_id`` is a UUID (no escaping)."""
    return (
        f'{{"outcome":"sent","slot":{slot},"at":{at},"by":{by_json},"task_id":"{task_id}",'
        f'"lateness_ms":{lateness_ms}}}'
    )


def decode(text: str) -> Record | None:
    """A stored record, or None for text that is not one (written by hand, or by a newer release
    with fields this one does not know is still read: unknown fields are ignored)."""
    try:
        data: Any = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("outcome"), str):
        return None
    known = Record.__dataclass_fields__
    fields = {key: value for key, value in data.items() if key in known}
    if not isinstance(fields.get("at", 0), int) or not isinstance(
        fields.get("slot", 0), int | None
    ):
        return None
    fields.setdefault("at", 0)
    fields.setdefault("slot", None)
    try:
        return Record(**fields)
    except TypeError:
        return None


#: Where each outcome falls in the life of a slot's task, to order outcomes of one instant.
STAGE = {
    TRIGGER: 0,
    SENT: 0,
    SKIPPED: 0,
    MISSED: 0,
    DROPPED: 0,
    STARTED: 1,
    SUCCEEDED: 2,
    FAILED: 2,
}


def newest_first(texts: Iterable[str]) -> list[Record]:
    """Stored records (the store's newest first) as readable records, newest first by when each
    happened. The store keeps them in the order they arrived, which is not that order: the beat's
    ``sent`` rides on its next store call, after the worker wrote ``started``. Ties go by the
    stage of the task's life (sent, started, then succeeded or failed), then by the store's
    order; a worker's outcome counts as no earlier than its task's sending, so a worker clock
    behind the beat's never shows a start before its send. Unreadable records are left out."""
    records = [record for record in map(decode, texts) if record is not None]
    sent_at = {r.task_id: r.at for r in records if r.task_id and r.outcome in (SENT, TRIGGER)}

    def when(item: tuple[int, Record]) -> tuple[int, int, int]:
        arrived, record = item
        at = record.at
        stage = STAGE.get(record.outcome, 0)
        if stage and record.task_id in sent_at:
            at = max(at, sent_at[record.task_id])
        return at, stage, -arrived

    return [record for _, record in sorted(enumerate(records), key=when, reverse=True)]


class Outbox:
    """Records waiting for the beat's next store call; safe to fill from any thread."""

    def __init__(self, cap: int = OUTBOX_CAP) -> None:
        self._items: deque[tuple[str, str]] = deque(maxlen=cap)
        self._lock = threading.Lock()

    def add(self, entry: str, record: Record) -> None:
        self.add_text(entry, encode(record))

    def add_text(self, entry: str, text: str) -> None:
        """Add a record already encoded (deque appends are atomic: no lock needed)."""
        self._items.append((entry, text))

    def drain(self) -> list[tuple[str, str]]:
        """Every waiting (entry, record text) pair, oldest first; the outbox is empty after."""
        if not self._items:
            return []
        with self._lock:
            items = []
            pop = self._items.popleft
            for _ in range(len(self._items)):
                items.append(pop())
        return items

    def __len__(self) -> int:
        return len(self._items)
