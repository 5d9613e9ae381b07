"""Backfill: send an entry's past slots in a range, each once (docs/design.md §19).

An operator asks (``ScheduleAdmin.backfill``, ``hashbeat backfill``); the request waits in the
store's queue beside the triggers, and the leader takes it under its lease and sends it
(beat/backfill.py), as it sends everything else. Each slot is claimed against the store's record
of sent slots (store/sent.py), so a slot that the regular path or an earlier backfill sent is not
sent again, and each goes out with its slot's own task id. The record knows only from its
horizon (SENT_KEEP_MS back at most): a range that starts before it is refused, since whether its
slots were sent cannot be known.

Here: the request's stored form, the slots of a range (the entry's own, as the catalog built
it), and what the operator's side checks and queues.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from celery_hashbeat.control.stored_text import DefinitionError, read_json
from celery_hashbeat.errors import HashbeatError
from celery_hashbeat.expr.slots import to_datetime, to_ms
from celery_hashbeat.store.sent import SENT_KEEP_MS

if TYPE_CHECKING:
    from celery_hashbeat.entries.catalog import Catalog
    from celery_hashbeat.entries.entry import Entry
    from celery_hashbeat.store import Store

#: A backfill of more slots than this must be confirmed (``--yes``, ``limit=None``).
BACKFILL_LIMIT = 10_000

#: The slots asked of the store's record in one call.
ASK_CHUNK = 10_000


class BackfillError(ValueError, HashbeatError):
    """A backfill refused; nothing was queued. The message says why and what to do."""


class Request(NamedTuple):
    """A backfill as it waits in the store: the entry, the request's id, the range (epoch ms,
    both ends included) and when it was asked; and ``claimer``, the claim whose answer the
    leader never heard (beat/backfill.py), to be asked again as the same claimer."""

    entry: str
    id: str
    start: int
    end: int
    at: int
    claimer: str = ""


def encode_request(request: Request) -> str:
    """The stored form; its "backfill" key (not a trigger's "id") is what tells the two apart,
    so a release that knows only triggers drops it as unreadable rather than running it."""
    data = {"backfill": request.id, "entry": request.entry, "from": request.start}
    claimer = {"claimer": request.claimer} if request.claimer else {}
    return json.dumps({**data, "to": request.end, "at": request.at, **claimer})


def decode_request(text: str) -> Request | None:
    """A stored backfill request, or None when ``text`` is something else waiting in the queue
    (a trigger); an unreadable one raises DefinitionError."""
    if '"backfill"' not in text:
        return None
    data = read_json("a stored backfill request", text)
    try:
        fields = [data[key] for key in ("entry", "backfill", "from", "to", "at")]
    except (KeyError, TypeError):
        raise DefinitionError(f"a stored backfill request {text[:80]!r} lacks a field") from None
    entry, ident, start, end, at = fields
    if not all(isinstance(each, int) and not isinstance(each, bool) for each in (start, end, at)):
        raise DefinitionError(f"a stored backfill request {text[:80]!r} has a time not in ms")
    claimer = str(data.get("claimer") or "")
    return Request(str(entry), str(ident), start, end, at, claimer)


def instant_ms(value: datetime | str, option: str) -> int:
    """An aware datetime, or ISO 8601 text with a zone, as epoch ms; a naive one is refused."""
    moment = value
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment.strip().replace("Z", "+00:00"))
        except ValueError:
            raise BackfillError(
                f"{option} {value!r} is not an ISO 8601 time: give one such as "
                "2026-05-01T00:00:00+00:00"
            ) from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise BackfillError(
            f"{option} {value!s} has no time zone: give one (2026-05-01T00:00:00+00:00, or Z "
            "for UTC), so that the range means the same on every host"
        )
    return to_ms(moment)


def slots_between(entry: Entry, start: int, end: int, limit: int | None = None) -> list[int]:
    """The entry's slots in ``[start, end]``, oldest first: the slots its beat would send; at
    most ``limit + 1`` of them (enough to tell that there are more)."""
    source = entry.source
    found: list[int] = []
    slot = source.next_after(start - 1)
    while slot <= end and (limit is None or len(found) <= limit):
        found.append(slot)
        slot = source.next_after(slot)
    return found


def refuse_chained(entry: Entry) -> None:
    """A plain interval counts each slot from the one before, so its past slots are not fixed:
    there is nothing to backfill."""
    if entry.source.chained:
        raise BackfillError(
            f"entry {entry.name!r} runs at a plain interval counted from its last run, so its "
            "past slots are not fixed and cannot be backfilled; give it a hashinterval or a "
            "crontab schedule, whose slots are"
        )


@dataclass(frozen=True)
class Backfill:
    """A backfill asked for (or, dry, looked at): the entry, the range (epoch ms), its slots,
    those the store's record shows sent already, and the request queued (None for a dry run)."""

    entry: str
    start_ms: int
    end_ms: int
    slots: tuple[int, ...]
    sent: frozenset[int]
    request: str | None = None

    @property
    def to_send(self) -> list[int]:
        return [slot for slot in self.slots if slot not in self.sent]

    def details(self) -> dict[str, Any]:
        """What the audit trail records of it."""
        return {
            "request": self.request,
            "from": slot_iso(self.start_ms),
            "to": slot_iso(self.end_ms),
            "slots": len(self.slots),
            "to_send": len(self.to_send),
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "from": slot_iso(self.start_ms),
            "to": slot_iso(self.end_ms),
            "slots": [{"slot": slot_iso(s), "sent": s in self.sent} for s in self.slots],
            "count": len(self.slots),
            "to_send": len(self.to_send),
            "request": self.request,
        }


def prepare(
    store: Store, entry: Entry, start: int, end: int, now: int, limit: int | None
) -> Backfill:
    """Check a backfill of ``entry``'s slots in ``[start, end]`` and read which were sent;
    refused (BackfillError) when the range is empty or upside down, reaches the future or
    starts before what the store can know, or holds more than ``limit`` slots."""
    name = entry.name
    if end < start:
        raise BackfillError(f"--to {slot_iso(end)} is before --from {slot_iso(start)}")
    if end > now:
        raise BackfillError(
            f"--to {slot_iso(end)} is in the future: a backfill sends past slots (the beat "
            "sends the coming ones); give a --to of now or earlier"
        )
    refuse_chained(entry)
    slots = slots_between(entry, start, end, limit)
    if limit is not None and len(slots) > limit:
        raise BackfillError(
            f"entry {name!r} has more than {limit:,} slots from {slot_iso(start)} to "
            f"{slot_iso(end)}: confirm a backfill this large with --yes (limit=None), or give "
            "a shorter range"
        )
    sent: set[int] = set()
    horizon = now
    for at in range(0, len(slots), ASK_CHUNK):
        recorded = store.recorded(name, slots[at : at + ASK_CHUNK])
        sent |= recorded.sent
        horizon = recorded.horizon_ms
    if slots and slots[0] < horizon:
        raise BackfillError(
            f"the store knows which slots of {name!r} were sent only from {slot_iso(horizon)} "
            f"(it keeps that record {SENT_KEEP_MS // 86_400_000} days, and since this release "
            f"first claimed), so slots before it could be sent twice; give a --from of "
            f"{slot_iso(horizon)} or later"
        )
    return Backfill(name, start, end, tuple(slots), frozenset(sent))


def ask(
    store: Store,
    catalog: Catalog,
    name: str,
    between: tuple[datetime | str, datetime | str],
    now: int,
    limit: int | None,
    dry_run: bool,
) -> Backfill:
    """A backfill of entry ``name`` (as ``catalog`` builds it) over ``between`` (--from, --to),
    checked (``prepare``) and, unless ``dry_run``, queued for the leader."""
    start, end = instant_ms(between[0], "--from"), instant_ms(between[1], "--to")
    entry = catalog.entries.get(name)
    if entry is None:
        copies = ", ".join(sorted(catalog.fanout.subs.get(name, ())))
        raise BackfillError(
            f"entry {name!r} is fanned out to workers: backfill each copy by its name ({copies})"
            if copies
            else f"entry {name!r} does not run (the beats refuse it, or no worker is known "
            "to fan it out to): `hashbeat schedule` says why"
        )
    found = prepare(store, entry, start, end, now, limit)
    return found if dry_run else queue(store, found, now)


def queue(store: Store, backfill: Backfill, now: int) -> Backfill:
    """Queue ``backfill`` for the leader; the same, with its request's id."""
    ident = str(uuid.uuid4())
    request = Request(backfill.entry, ident, backfill.start_ms, backfill.end_ms, now)
    store.ask(encode_request(request))
    return dataclasses.replace(backfill, request=ident)


def slot_iso(slot: int) -> str:
    """A slot as the ``hashbeat_slot`` header spells it (publish/message.py, which this room
    does not import): ISO 8601 in UTC, to the millisecond."""
    return to_datetime(slot).isoformat(timespec="milliseconds")


def slot_range(slots: Sequence[int]) -> str:
    """``slots`` in a few words, for a log line."""
    if not slots:
        return "no slots"
    return f"{len(slots)} slot(s) from {slot_iso(slots[0])} to {slot_iso(slots[-1])}"
