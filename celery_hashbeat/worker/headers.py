"""What a task's message says about the slot it was sent for, read on the worker's side."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from celery_hashbeat.publish.message import ENTRY_HEADER, RUN_TTL_HEADER, SLOT_HEADER


@dataclass(frozen=True, slots=True)
class SlotMessage:
    """The hashbeat headers of one task's message, as the worker uses them."""

    entry: str
    #: A guarded entry's run-lease TTL (ms): the worker keeps the lease while the task runs.
    run_ttl_ms: int | None
    #: The slot (UTC epoch ms), for the entry's history; None for a trigger's run.
    slot_ms: int | None


def read(headers: Any) -> SlotMessage | None:
    """The hashbeat headers of a task's request (or its message's request dict), or None for a
    task that carries neither a run lease nor a slot."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    entry = get(ENTRY_HEADER)
    if not isinstance(entry, str):
        return None
    message = SlotMessage(entry, _run_ttl_ms(get(RUN_TTL_HEADER)), _slot_ms(get(SLOT_HEADER)))
    if message.run_ttl_ms is None and message.slot_ms is None:
        return None
    return message


def _run_ttl_ms(ttl_s: Any) -> int | None:
    if not isinstance(ttl_s, int | float) or ttl_s <= 0:
        return None
    return max(1, round(ttl_s * 1000))


def _slot_ms(slot: Any) -> int | None:
    if not isinstance(slot, str):
        return None
    try:
        return int(datetime.fromisoformat(slot).timestamp() * 1000)
    except ValueError:
        return None
