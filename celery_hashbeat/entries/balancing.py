"""Balanced spread in the beat (docs/design.md §16): which entries are balanced, in which groups,
and the schedules they run with.

A ``hashcron`` entry is balanced when it says ``balanced=True``, or says nothing and the app sets
``hashbeat_balance = True``. Balanced entries compete with those of the same shape, zone and day
rule (``expr.balance.shape_of``); the copies of one entry fanned out to workers form a group of
their own, dealt out tightly, so that each worker gets a value of its own where the range has
enough. Each group's assignment is a function of its members alone (``expr.balance.place``),
recomputed when a member comes or goes; the definitions of members whose values moved are handed
back, to be built again.

A million balanced entries start within seconds (docs/design.md §7), so what is kept per entry is
plain: its definition, its group and its key in dicts by name; a group keeps its assignment as
the members of each occupied slot, which is also the form the store keeps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any

from celery_hashbeat.entries.building import as_definition
from celery_hashbeat.expr import CronSyntaxError
from celery_hashbeat.expr.balance import Term, offsets_at, place, shape_of, terms_of
from celery_hashbeat.expr.seeding import Key
from celery_hashbeat.schedules import hashcron


class Group:
    """Balanced entries that compete for the same slots, and the slot each of them holds."""

    __slots__ = ("_offsets", "identity", "keys", "sizes", "slot_of", "terms", "tight")

    def __init__(self, identity: Hashable, terms: tuple[Term, ...], tight: bool) -> None:
        self.identity = identity
        self.terms = terms
        self.sizes = tuple(term.count for term in terms)
        self.tight = tight
        #: Member -> the key its hash terms draw from.
        self.keys: dict[str, Key] = {}
        #: Member -> its slot (``expr.balance.offsets_at``), as last placed: members that left
        #: are kept until the group is placed again.
        self.slot_of: dict[str, int] = {}
        self._offsets: dict[int, tuple[int, ...]] = {}

    def offsets(self, slot: int) -> tuple[int, ...]:
        """The offsets of ``slot``: one tuple per slot, however many members hold it."""
        found = self._offsets.get(slot)
        if found is None:
            found = self._offsets[slot] = offsets_at(slot, self.sizes)
        return found

    def replace(self, fresh: set[str]) -> tuple[list[str], list[int]]:
        """Place the members afresh; those that moved, came, or are in ``fresh`` (given a new
        definition), and their slots, in the order they joined."""
        names = list(self.keys)
        keys = list(self.keys.values())
        distinct = list(dict.fromkeys(keys))
        slots = place(distinct, self.terms, tight=self.tight)
        if len(distinct) < len(keys):  # members that share a key share its slot
            slots = list(map(dict(zip(distinct, slots, strict=True)).__getitem__, keys))
        before, self.slot_of = self.slot_of, dict(zip(names, slots, strict=True))
        if not before:
            return names, slots
        moved = [
            at
            for at, (name, slot) in enumerate(zip(names, slots, strict=True))
            if before.get(name) != slot or name in fresh
        ]
        return [names[at] for at in moved], [slots[at] for at in moved]


class Balancer:
    """The balanced entries of one schedule and the values assigned to them."""

    def __init__(self, default: bool, zone: str, parent_of: Callable[[str], str | None]) -> None:
        self.default = default
        self.zone = zone
        self.parent_of = parent_of
        #: Balanced entry -> its definition, as given.
        self.definitions: dict[str, Mapping[str, Any]] = {}
        #: Balanced entry -> its group.
        self.group_of: dict[str, Group] = {}
        self._groups: dict[Hashable, Group] = {}
        #: Counts the changes to the assignment, so that a leader stores each one once.
        self.version = 0
        #: Placed schedules, shared by the entries whose schedules and offsets agree.
        self._schedules: dict[tuple[Any, ...], hashcron] = {}
        #: (expression, zone, day rule) -> its hash terms and the identity of the group of its
        #: entries that are not copies on workers (made once: there may be a million of them).
        self._kinds: dict[tuple[str, str, bool], tuple[tuple[Term, ...], tuple[Any, ...]]] = {}

    @property
    def offsets(self) -> dict[str, tuple[int, ...]]:
        """Balanced entry -> the offsets of its hash terms now."""
        return {
            name: group.offsets(slot)
            for group in self._groups.values()
            for name, slot in group.slot_of.items()
        }

    def take(self, definitions: Mapping[str, Any]) -> dict[str, Any]:
        """``definitions`` (added or replaced) with balanced schedules placed, and the
        definitions of other entries whose values moved."""
        touched: set[Group] = set()
        fresh: set[str] = set()
        group_of, kept = self.group_of, self.definitions
        for name, definition in definitions.items():
            if name in group_of:
                touched.add(self._forget(name))
                fresh.add(name)
            mapping = as_definition(definition)
            joined = None if mapping is None else self._join(name, mapping)
            if joined is None or mapping is None:
                continue
            group, key = joined
            group.keys[name] = key
            group_of[name] = group
            kept[name] = mapping
            touched.add(group)
        result = dict(definitions)
        result.update(self._assign(touched, fresh))
        return result

    def drop(self, names: Iterable[str]) -> dict[str, Any]:
        """Forget entries that left the schedule; the definitions of those whose values moved."""
        group_of = self.group_of
        return self._assign({self._forget(name) for name in names if name in group_of}, set())

    def stored_form(self) -> str:
        """The assignment as the store keeps it: JSON, ``{"groups": [{"sizes": [60], "entries":
        [...], "slots": [...]}]}``: each group's entries and their slots, side by side (a slot
        numbers a combination of the hash terms' offsets, the first term counting most, over
        terms of ``sizes`` values). Written in the first tick of a million entries: two flat
        lists, no record per entry and no sorting."""
        groups = [
            {
                "sizes": group.sizes,
                "entries": list(group.slot_of),
                "slots": list(group.slot_of.values()),
            }
            for group in self._groups.values()
        ]
        return json.dumps({"groups": groups}, separators=(",", ":"))

    def _join(self, name: str, mapping: Mapping[str, Any]) -> tuple[Group, Key] | None:
        """The group of entry ``name`` and the key its terms draw from; None when it is not
        balanced."""
        given = mapping.get("schedule")
        if not isinstance(given, hashcron):
            return None
        if not (self.default if given.balanced is None else given.balanced):
            return None
        if not isinstance(given.expr, str):
            return None  # building the entry reports it, by name
        zone = str(given.zone) if given.zone is not None else self.zone
        kind = self._kinds.get((given.expr, zone, given.day_and))
        if kind is None:
            try:
                terms = terms_of(given.expr)
                shape = (shape_of(given.expr), zone, given.day_and, None)
            except CronSyntaxError:
                return None  # as above
            kind = self._kinds[given.expr, zone, given.day_and] = (terms, shape)
        terms, identity = kind
        if not terms:
            return None
        parent = self.parent_of(name)
        if parent is not None:
            identity = (*identity[:-1], parent)
        group = self._groups.get(identity)
        if group is None:
            group = self._groups[identity] = Group(identity, terms, parent is not None)
        return group, given.key if given.key is not None else name

    def _forget(self, name: str) -> Group:
        """Take out a member; its group."""
        group = self.group_of.pop(name)
        del group.keys[name], self.definitions[name]
        self.version += 1
        return group

    def _assign(self, groups: set[Group], fresh: set[str]) -> dict[str, dict[str, Any]]:
        """Place the ``groups`` afresh; the definitions of the members that moved or came, and
        the ``fresh`` ones, with their schedules at their offsets."""
        definitions, schedules = self.definitions, self._schedules
        placed = {}
        for group in groups:
            if not group.keys:
                del self._groups[group.identity]
                continue
            names, slots = group.replace(fresh)
            for name, slot in zip(names, slots, strict=True):
                offsets = group.offsets(slot)
                definition = definitions[name]
                schedule = definition["schedule"]
                identity = (*schedule._identity(), offsets)
                found = schedules.get(identity)
                if found is None:
                    found = schedules[identity] = schedule.placed(offsets)
                placed[name] = {**definition, "schedule": found}
        self.version += bool(placed)
        return placed


def read_stored(text: str | None) -> dict[str, tuple[int, ...]]:
    """Entry -> offsets, from the assignment a leader stored (``Balancer.stored_form``, or the
    ``{entry: [offsets]}`` that leaders before it wrote); raises ValueError if it is neither."""
    document = json.loads(text or "{}")
    if not isinstance(document, dict):
        raise ValueError("the stored balance is not a JSON object")
    groups = document.get("groups")
    if not isinstance(groups, list):  # an older leader's document
        return {
            name: tuple(offsets) for name, offsets in document.items() if isinstance(offsets, list)
        }
    try:
        return {
            name: offsets_at(slot, tuple(group["sizes"]))
            for group in groups
            for name, slot in zip(group["entries"], group["slots"], strict=True)
        }
    except (TypeError, KeyError) as exc:
        raise ValueError(
            f"the stored balance is not as Balancer.stored_form writes it: {exc}"
        ) from exc
