"""The message of a slot: its task id, its headers, and how it goes out through Celery.

A slot's task carries the id ``uuid5(NAMESPACE, "<entry>|<slot ms>")`` and the headers
``hashbeat_entry`` and ``hashbeat_slot`` (docs/design.md §5), so downstream code can recognise it
whichever beat sent it; everything else is as Celery's own scheduler would send it.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
import uuid
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from celery.beat import BeatLazyFunc

from celery_hashbeat.expr.slots import to_datetime

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.entries.entry import Entry

#: Fixed forever: changing it breaks deduplication across releases.
NAMESPACE = uuid.UUID("46f53fda-c94e-4ed5-bf27-9d8b09c0a1e3")

# Every message header celery_hashbeat sets or reads. Tasks, workers and other tools read them by
# these names: they never change.
#: The entry a slot's (or trigger's) task was sent for.
ENTRY_HEADER = "hashbeat_entry"
#: The slot, ISO 8601 in UTC to the millisecond (``slot_iso``).
SLOT_HEADER = "hashbeat_slot"
#: When an operator asked for a trigger's one run; set instead of ``SLOT_HEADER``.
TRIGGER_HEADER = "hashbeat_trigger"
#: A guarded entry's run-lease TTL in seconds: the worker keeps the lease alive
#: (docs/design.md §12).
RUN_TTL_HEADER = "hashbeat_run_ttl"
#: Celery's beat marks its sends with it; hashbeat's sends carry it too.
BEAT_TASK_HEADER = "celery_beat_task"
#: Celery's own header (message protocol 2) for the task id, read by the batch transports.
TASK_ID_HEADER = "id"
#: kombu's own header naming a compressed body's codec, set by the Redis batch transport.
COMPRESSION_HEADER = "compression"


#: SHA-1 with ``NAMESPACE`` already fed in: a UUID 5 is the hash of the namespace and the name.
_NAMESPACED = hashlib.sha1(NAMESPACE.bytes, usedforsecurity=False)


def slot_task_id(entry: str, slot: int) -> str:
    """The task id of an entry's slot, the same from every beat: ``uuid5(NAMESPACE,
    "<entry>|<slot>")``, made without the ``UUID`` object (a burst makes thousands)."""
    digest = _NAMESPACED.copy()
    digest.update(f"{entry}|{slot}".encode())
    return _as_uuid(digest.hexdigest(), "5")


#: RFC 4122's variant in the high bits of a UUID's 9th byte ("10xx"), by the hex digit there.
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def _as_uuid(hex_text: str, version: str) -> str:
    """The text of the UUID in the first 32 hex digits of ``hex_text``, with the version digit
    and RFC 4122's variant set, as ``uuid.UUID(bytes=..., version=...)`` does."""
    h = hex_text
    return f"{h[:8]}-{h[8:12]}-{version}{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"


class _Tags:
    """Where ``unique_uuid`` draws from: a random version-4 UUID per process, whose last 12 hex
    digits count up. Drawn again in a forked child, so that no two processes share one."""

    def __init__(self) -> None:
        self.draw()

    def draw(self) -> None:
        drawn = f"{random.SystemRandom().getrandbits(128):032x}"
        self.prefix = _as_uuid(drawn, "4")[:24]
        self.count = itertools.count(int(drawn[20:], 16))


_TAGS = _Tags()
os.register_at_fork(after_in_child=_TAGS.draw)


def unique_uuid() -> str:
    """A version-4 UUID's text, unique in this process and across processes, at a fraction of
    ``str(uuid.uuid4())``'s cost: kombu's Redis transport gives each message one as its
    delivery tag, which needs to be unique, not secret or random."""
    return f"{_TAGS.prefix}{next(_TAGS.count) & 0xFFFF_FFFF_FFFF:012x}"


@lru_cache(maxsize=4096)
def slot_iso(slot: int) -> str:
    """A slot as ISO 8601 in UTC, to the millisecond, for the ``hashbeat_slot`` header."""
    return to_datetime(slot).isoformat(timespec="milliseconds")


def slot_headers(entry: Entry, when: str, trigger: bool = False) -> dict[str, Any]:
    """The entry's own headers plus the hashbeat ones, for the slot at ``when``; a trigger (one
    run asked for at ``when``, not a slot) says so in ``hashbeat_trigger`` instead of
    ``hashbeat_slot``."""
    headers = {
        **(entry.options.get("headers") or {}),
        BEAT_TASK_HEADER: True,
        ENTRY_HEADER: entry.name,
        TRIGGER_HEADER if trigger else SLOT_HEADER: when,
    }
    if entry.run_ttl_ms:
        # The worker that runs it keeps the entry's run lease alive for as long
        # (docs/design.md §12).
        headers[RUN_TTL_HEADER] = entry.run_ttl_ms / 1000
    return headers


def slot_arguments(entry: Entry) -> tuple[Any, dict[str, Any]]:
    """The task's args and kwargs, lazy ones evaluated now. A list, as Celery's beat passes
    them, so argsrepr reads "[1, 2]" in either beat."""
    args: Any = list(entry.args)
    kwargs = entry.kwargs
    if entry.lazy:
        args = [arg() if isinstance(arg, BeatLazyFunc) else arg for arg in args]
        kwargs = {k: v() if isinstance(v, BeatLazyFunc) else v for k, v in kwargs.items()}
    return args, kwargs


def slot_options(entry: Entry, task_id: str, when: str, trigger: bool = False) -> dict[str, Any]:
    """The ``apply_async`` options of one slot of ``entry``: the entry's own, the slot's task id
    and the hashbeat headers (a trigger's: see ``slot_headers``)."""
    options = {key: value for key, value in entry.options.items() if key != "headers"}
    options["task_id"] = task_id
    # One attempt per message: beat retries a slot itself, and only when it surely did not reach
    # the broker (see ``publishing``); Celery's retry could send it twice.
    options.setdefault("retry", False)
    options["headers"] = slot_headers(entry, when, trigger)
    return options


def send_slot(
    app: Celery, producer: Any, entry: Entry, task_id: str, when: str, trigger: bool = False
) -> Any:
    """Publish one slot of ``entry`` with its options, as Celery's scheduler would, plus the
    slot's task id and the hashbeat headers (``slot_options``)."""
    options = slot_options(entry, task_id, when, trigger)
    args, kwargs = slot_arguments(entry)
    task = app.tasks.get(entry.task)
    if task is not None:
        return task.apply_async(args, kwargs, producer=producer, **options)
    return app.send_task(entry.task, args, kwargs, producer=producer, **options)
