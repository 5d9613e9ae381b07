"""Balanced spread in the beat (docs/design.md §16): which entries are balanced, in which groups,
and the schedules they run with.

A ``hashcron`` entry is balanced when it says ``balanced=True``, or says nothing and the app sets
``hashbeat_balance = True``. Balanced entries compete with those of the same shape, zone and day
rule (``expr.balance.shape_of``); the copies of one entry fanned out to workers form a group of
their own, dealt out tightly, so that each worker gets a value of its own where the range has
enough. Each group's assignment is a function of its members alone (``expr.balance.assign``),
recomputed when a member comes or goes; the definitions of members whose values moved are handed
back, to be built again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, NamedTuple

from celery_hashbeat.entries.building import as_definition
from celery_hashbeat.expr import CronSyntaxError
from celery_hashbeat.expr.balance import Term, assign, shape_of, terms_of
from celery_hashbeat.expr.seeding import Key
from celery_hashbeat.schedules import hashcron


class Member(NamedTuple):
    """A balanced entry: its group, the key its hash terms draw from, and its definition (a
    tuple: a hundred thousand of them are made at start)."""

    group: Hashable
    key: Key
    terms: tuple[Term, ...]
    tight: bool
    definition: Mapping[str, Any]


class Balancer:
    """The balanced entries of one schedule and the values assigned to them."""

    def __init__(self, default: bool, zone: str, parent_of: Callable[[str], str | None]) -> None:
        self.default = default
        self.zone = zone
        self.parent_of = parent_of
        self.members: dict[str, Member] = {}
        self.groups: dict[Hashable, set[str]] = {}
        #: Entry -> the offsets of its hash terms now.
        self.offsets: dict[str, tuple[int, ...]] = {}
        #: Counts the changes to ``offsets``, so that a leader stores each assignment once.
        self.version = 0
        #: Placed schedules, shared by the entries whose schedules and offsets agree.
        self._schedules: dict[tuple[Any, ...], hashcron] = {}
        #: (expression, zone, day rule) -> its hash terms and the group of its entries that are
        #: not copies on workers (made once: there may be a hundred thousand of them).
        self._kinds: dict[tuple[str, str, bool], tuple[tuple[Term, ...], tuple[Any, ...]]] = {}

    def take(self, definitions: Mapping[str, Any]) -> dict[str, Any]:
        """``definitions`` (added or replaced) with balanced schedules placed, and the
        definitions of other entries whose values moved."""
        touched: set[Hashable] = set()
        members, groups = self.members, self.groups
        for name, definition in definitions.items():
            if name in members:
                touched.add(self._forget(name))
            member = self._member(name, definition)
            if member is None:
                continue
            members[name] = member
            names = groups.get(member.group)
            if names is None:
                names = groups[member.group] = set()
            names.add(name)
            touched.add(member.group)
        moved = self._assign(touched)
        result = dict(definitions)
        result.update(self._placed(moved.union(name for name in definitions if name in members)))
        return result

    def drop(self, names: Iterable[str]) -> dict[str, Any]:
        """Forget entries that left the schedule; the definitions of those whose values moved."""
        members = self.members
        touched = {self._forget(name) for name in names if name in members}
        return self._placed(self._assign(touched))

    def stored_form(self) -> str:
        """The assignment as the store keeps it: JSON, entry -> offsets, in name order."""
        return json.dumps(self.offsets, sort_keys=True)

    def _member(self, name: str, definition: Any) -> Member | None:
        mapping = as_definition(definition)
        given = None if mapping is None else mapping.get("schedule")
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
        terms, group = kind
        if not terms:
            return None
        parent = self.parent_of(name)
        if parent is not None:
            group = (*group[:-1], parent)
        key = given.key if given.key is not None else name
        assert mapping is not None
        return Member(group, key, terms, parent is not None, mapping)

    def _forget(self, name: str) -> Hashable:
        """Take out a member; its group."""
        member = self.members.pop(name)
        del self.offsets[name]
        self.version += 1
        self.groups[member.group].discard(name)
        return member.group

    def _assign(self, groups: set[Hashable]) -> set[str]:
        """Assign the ``groups`` afresh; the entries whose offsets changed or were new."""
        changed: set[str] = set()
        members, offsets = self.members, self.offsets
        for group in groups:
            names = list(self.groups.get(group, ()))
            if not names:
                self.groups.pop(group, None)
                continue
            keys = [members[name].key for name in names]
            first = members[names[0]]
            found = assign(dict.fromkeys(keys), first.terms, tight=first.tight)
            for name, key in zip(names, keys, strict=True):
                value = found[key]
                if offsets.get(name) != value:
                    offsets[name] = value
                    changed.add(name)
        self.version += bool(changed)
        return changed

    def _placed(self, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The definitions of ``names`` with their schedules at their offsets."""
        members, offsets, schedules = self.members, self.offsets, self._schedules
        placed = {}
        for name in names:
            definition = members[name].definition
            schedule = definition["schedule"]
            value = offsets[name]
            identity = (*schedule._identity(), value)
            found = schedules.get(identity)
            if found is None:
                found = schedules[identity] = schedule.placed(value)
            placed[name] = {**definition, "schedule": found}
        return placed
