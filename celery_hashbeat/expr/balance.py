"""Balanced spread (docs/design.md §16): hash-term values for a set of keys that share a shape, so
that no slot holds more than ceil(N / slots) + 1 of them.

Pure hashing throws N keys at S slots like dice. Here every key still starts from its hashed
value (docs/design.md §3), and only the keys a crowded slot cannot hold move:

1. The *capacity* of slot s is ``N // S + 1``, one more if ``s < 2 * (N % S)`` (``capacities``).
2. Each key asks for slots in turn: its hashed slot (attempt 0), then its own probe sequence
   (``draw(key, "balance", i) % S`` for attempts i = 1, 2, ...; a scan after 64 draws).
3. A slot asked by more keys than it can hold keeps the *strongest*: the lowest attempt, then
   the first by *priority* (the first hash term's 64-bit draw, then the key's bytes). A key
   turned away, now or later, asks its next slot.

That is deferred acceptance (Gale and Shapley): whatever the order of the asking, it ends in the
same assignment, so the result depends only on the set of keys. Ranking by attempt makes a key
weaker each time it is turned away, so the chain of keys that one added or removed key displaces
ends sooner than when slots rank by priority alone; the capacities decide how much room is left
to end it in. ``benchmarks/balance.py`` measures both.

A slot is a combination of the shape's hash terms (one value each), so ``H H * * *`` balances
over 1,440 minutes of the day. A *tight* group (one entry's copies on its workers) uses capacity
ceil(N / S) everywhere, so twenty workers get twenty distinct values wherever the range has
twenty.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache

from celery_hashbeat.expr.grammar import Template, parse_template
from celery_hashbeat.expr.seeding import Key, draw, drawn, draws, key_bytes, term_bytes

#: The seed field of the balancer's own draws (priority and probes); part of the contract of
#: balanced values, as docs/design.md §3's field names are of hashed ones.
BALANCE_FIELD = "balance"

#: Random probes before an overflowing key scans the slots in order.
PROBES = 64


@dataclass(frozen=True, slots=True)
class Term:
    """One hash term's draw: what seeds it, and how many values it chooses among."""

    seed: str
    occurrence: int
    count: int


@lru_cache(maxsize=1024)
def terms_of(expression: str) -> tuple[Term, ...]:
    """The hash terms of ``expression``, left to right (raises CronSyntaxError if invalid)."""
    return _terms(parse_template(expression))


def _terms(template: Template) -> tuple[Term, ...]:
    return tuple(
        Term(written.field.seed_name, term.occurrence, term.step or term.high - term.low + 1)
        for written in template.fields
        for term in written.hashes
    )


@lru_cache(maxsize=1024)
def shape_of(expression: str) -> str:
    """What makes two expressions compete for the same slots: every field's plain values and
    rules, and the range and step of each hash term, however they are spelled (``H``,
    ``H(0-59)`` and ``#`` in the minute field are one shape). Text, so that grouping a hundred
    thousand entries hashes it once."""
    template = parse_template(expression)
    return " ".join(
        f"{written.field.seed_name}={sorted(written.values)}"
        f"{[(term.low, term.high, term.step) for term in written.hashes]}"
        f"{int(written.last_day)}{int(written.last_weekday)}{sorted(written.nearest_weekdays)}"
        f"{sorted(written.last_weekdays_of)}{sorted(written.nth_weekdays)}"
        for written in template.fields
    )


def seeded(key: Key, terms: tuple[Term, ...]) -> tuple[int, ...]:
    """The offsets (value minus the term's low end) that pure hashing gives ``key``."""
    return tuple(draw(key, term.seed, term.occurrence) % term.count for term in terms)


def assign(
    keys: Collection[Key], terms: tuple[Term, ...], *, tight: bool = False
) -> dict[Key, tuple[int, ...]]:
    """Each key's offsets, one per term, balanced over the slots the terms span."""
    if not terms:
        return dict.fromkeys(keys, ())
    order = list(dict.fromkeys(keys))
    sizes = tuple(term.count for term in terms)
    table = [offsets_at(slot, sizes) for slot in range(math.prod(sizes))]
    return dict(zip(order, map(table.__getitem__, place(order, terms, tight=tight)), strict=True))


def place(keys: Sequence[Key], terms: tuple[Term, ...], *, tight: bool = False) -> list[int]:
    """The slot of each of ``keys`` (distinct; at least one term), by position: a slot numbers
    a combination of the terms' offsets (``offsets_at``). Plain lists of ints, since a group may
    have a million members."""
    sizes = tuple(term.count for term in terms)
    slots = math.prod(sizes)
    count = len(keys)
    caps = capacities(count, slots, tight=tight)
    # One sha256 per term and key: the first term's draw is also the key's priority.
    encoded = [key.encode() if type(key) is str else key_bytes(key) for key in keys]
    columns = [draws(encoded, term.seed, term.occurrence) for term in terms]
    priority = columns[0]
    if len(set(priority)) < count:  # equal draws: the key's bytes decide, as on any machine
        ranked = sorted(range(count), key=lambda at: (priority[at], encoded[at]))
        priority = [0] * count
        for rank, at in enumerate(ranked):
            priority[at] = rank
    natives = [u % sizes[0] for u in columns[0]]
    for column, size in zip(columns[1:], sizes[1:], strict=True):
        natives = [native * size + u % size for native, u in zip(natives, column, strict=True)]
    # A key's standing at a slot is one int, lower is stronger: its attempt, then its priority
    # (below 2**64), then its position (which never decides: priorities differ). held[s] holds
    # minus the standings of the keys slot s keeps, so its weakest is held[s][0].
    shift = count.bit_length()
    position = (1 << shift) - 1
    attempt_shift = 64 + shift
    held: list[list[int]] = [[] for _ in range(slots)]
    asks = [holders.append for holders in held]
    for at, (first, native) in enumerate(zip(priority, natives, strict=True)):
        asks[native](-((first << shift) | at))
    turned: list[int] = []  # standings of the keys turned away, each to ask its next slot
    for holders, cap in zip(held, caps, strict=True):
        heapq.heapify(holders)
        while len(holders) > cap:
            turned.append(-heapq.heappop(holders))
    moved: dict[int, int] = {}  # position -> the slot that took it last, for keys turned away
    while turned:
        standing = turned.pop() + (1 << attempt_shift)
        at = standing & position
        slot = _probe(encoded[at], standing >> attempt_shift, slots)
        holders = held[slot]
        if len(holders) < caps[slot]:
            heapq.heappush(holders, -standing)
            moved[at] = slot
        elif standing < -holders[0]:
            turned.append(-heapq.heapreplace(holders, -standing))
            moved[at] = slot
        else:
            turned.append(standing)
    for at, slot in moved.items():  # every other key holds its native slot
        natives[at] = slot
    return natives


def capacities(count: int, slots: int, *, tight: bool = False) -> list[int]:
    """How many of ``count`` keys each slot may hold: ceil(count / slots) for a tight group;
    otherwise count // slots + 1, and one more for the first 2 * (count % slots) slots (all of
    them at most ceil(count / slots) + 1, together at least count). Capacity grows two slots per
    added key until every slot has grown: growth one slot at a time left the least room to
    spare, and all at once moved a key from every crowded slot in one change."""
    if tight:
        return [-(-count // slots)] * slots
    share, rest = divmod(count, slots)
    return [share + 1 + (slot < 2 * rest) for slot in range(slots)]


def _probe(key: bytes, attempt: int, slots: int) -> int:
    """Where a key (its bytes) turned away asks at its ``attempt``: random draws, then every
    slot in turn from the last of them (so that every key finds room: the capacities add up to
    N or more)."""
    if attempt <= PROBES:
        return drawn(key + term_bytes(BALANCE_FIELD, attempt)) % slots
    return (drawn(key + term_bytes(BALANCE_FIELD, PROBES)) + attempt - PROBES) % slots


def offsets_at(index: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The offsets of slot ``index`` over terms of ``sizes`` values: the first term counts most."""
    found = []
    for size in reversed(sizes):
        index, offset = divmod(index, size)
        found.append(offset)
    return tuple(reversed(found))
