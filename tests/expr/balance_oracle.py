"""docs/design.md §16's balanced assignment, written out plainly from docs/seeding.md ("Balanced
spread") without looking at the engine: textbook Gale-Shapley in rounds (every key without a
slot asks its next one at once; each slot sorts what it holds and what it is asked, and keeps
the first), preference lists spelled out in full, draws from ``oracle.hash_u``.

Nothing here imports ``celery_hashbeat``: the oracle must be able to disagree with it.
"""

from __future__ import annotations

import math

from .oracle import hash_u, key_material

#: Random slots a key asks after its hashed one, before it walks the slots in order.
PROBES = 64


def capacities(count: int, slots: int, tight: bool) -> list[int]:
    """How many keys slot s may hold (docs/seeding.md, step 2)."""
    if tight:
        return [math.ceil(count / slots)] * slots
    return [count // slots + 1 + (1 if s < 2 * (count % slots) else 0) for s in range(slots)]


def balanced(
    keys: list[str], terms: list[tuple[str, int, int]], tight: bool = False
) -> dict[str, tuple[int, ...]]:
    """Each key's offsets; ``terms`` are (field, occurrence, count), left to right."""
    counts = [count for _, _, count in terms]
    slots = math.prod(counts)

    def slot_of(offsets: list[int]) -> int:  # the first term counts most
        index = 0
        for offset, count in zip(offsets, counts, strict=True):
            index = index * count + offset
        return index

    def offsets_of(slot: int) -> tuple[int, ...]:
        found = []
        for count in reversed(counts):
            slot, offset = divmod(slot, count)
            found.insert(0, offset)
        return tuple(found)

    wishes = {}
    for key in keys:
        native = slot_of([hash_u(key, f, o) % c for f, o, c in terms])
        probes = [hash_u(key, "balance", i) % slots for i in range(1, PROBES + 1)]
        walk = [(probes[-1] + step) % slots for step in range(1, slots + 1)]
        wishes[key] = [native, *probes, *walk]
    priority = {key: (hash_u(key, *terms[0][:2]), key_material(key)) for key in keys}
    caps = capacities(len(keys), slots, tight)
    held: dict[int, list[tuple[int, str]]] = {s: [] for s in range(slots)}  # (attempt, key)
    attempt = dict.fromkeys(keys, 0)
    free = list(keys)
    while free:
        asked: dict[int, list[tuple[int, str]]] = {}
        for key in free:
            asked.setdefault(wishes[key][attempt[key]], []).append((attempt[key], key))
        free = []
        for slot, askers in asked.items():
            everyone = sorted(held[slot] + askers, key=lambda a: (a[0], priority[a[1]]))
            held[slot] = everyone[: caps[slot]]
            for turned_attempt, key in everyone[caps[slot] :]:
                attempt[key] = turned_attempt + 1
                free.append(key)
    return {key: offsets_of(slot) for slot, pairs in held.items() for _, key in pairs}
