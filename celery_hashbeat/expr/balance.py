"""Balanced spread (DESIGN.md §16): hash-term values for a set of keys that share a shape, so
that no slot holds more than ceil(N / slots) + 1 of them.

Pure hashing throws N keys at S slots like dice. Here every key still starts from its hashed
value (DESIGN.md §3), and only the keys a crowded slot cannot hold move:

1. The *capacity* of slot s is ``(N + s) // S + 1``: the capacities sum to N + S, none exceeds
   ceil(N / S) + 1, and one more key raises exactly one slot's capacity by one (never all at
   once, which would move many keys in one go).
2. Each slot keeps, up to its capacity, the keys hashed to it that come first by *priority*
   (the first hash term's 64-bit draw, then the key's bytes); the rest overflow.
3. Overflowing keys, by priority, take the first slot with room along their own probe sequence
   (``draw(key, "balance", i) % S`` for i = 1, 2, ...; a scan after 64 draws).

The result depends only on the set of keys, never on their order. A slot is a combination of
the shape's hash terms (one value each), so ``H H * * *`` balances over 1,440 minutes of the
day. A *tight* group (one entry's copies on its workers) uses capacity ceil(N / S) everywhere,
so twenty workers get twenty distinct values wherever the range has twenty.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import lru_cache

from .grammar import Template, parse_template
from .seeding import Key, draw, key_bytes

#: The seed field of the balancer's own draws (priority and probes); part of the contract of
#: balanced values, as DESIGN.md §3's field names are of hashed ones.
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
    sizes = tuple(term.count for term in terms)
    slots = 1
    for size in sizes:
        slots *= size
    count = len(keys)
    loads: dict[int, int] = {}

    def room(slot: int) -> bool:
        cap = -(-count // slots) if tight else (count + slot) // slots + 1
        return loads.get(slot, 0) < cap

    # One sha256 per term and key: the first term's draw is also the key's priority.
    draws = {key: [draw(key, term.seed, term.occurrence) for term in terms] for key in keys}
    placed: dict[Key, int] = {}
    overflow: list[Key] = []
    for key in sorted(keys, key=lambda key: (draws[key][0], key_bytes(key))):
        native = _index(tuple(u % size for u, size in zip(draws[key], sizes, strict=True)), sizes)
        if room(native):
            loads[native] = loads.get(native, 0) + 1
            placed[key] = native
        else:
            overflow.append(key)
    for key in overflow:
        slot = next(slot for slot in _probes(key, slots) if room(slot))
        loads[slot] = loads.get(slot, 0) + 1
        placed[key] = slot
    shared: dict[int, tuple[int, ...]] = {}  # one tuple per slot, however many keys hold it
    return {
        key: shared.get(slot) or shared.setdefault(slot, _offsets(slot, sizes))
        for key, slot in placed.items()
    }


def _probes(key: Key, slots: int) -> Iterator[int]:
    """Where an overflowing key looks for room: random draws, then every slot in turn."""
    slot = 0
    for attempt in range(1, PROBES + 1):
        slot = draw(key, BALANCE_FIELD, attempt) % slots
        yield slot
    for step in range(1, slots + 1):
        yield (slot + step) % slots


def _index(offsets: tuple[int, ...], sizes: tuple[int, ...]) -> int:
    index = 0
    for offset, size in zip(offsets, sizes, strict=True):
        index = index * size + offset
    return index


def _offsets(index: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
    found = []
    for size in reversed(sizes):
        index, offset = divmod(index, size)
        found.append(offset)
    return tuple(reversed(found))
