"""Balanced spread in the beat (docs/design.md §16): which entries are balanced, in which groups,
and the schedules they run with.

A ``hashcron`` entry is balanced when it says ``balanced=True``, or says nothing and the app sets
``hashbeat_balance = True``. Balanced entries compete with those of the same shape, zone and day
rule (``expr.balance.shape_of``); the copies of one entry fanned out to workers form a group of
their own, dealt out tightly, so that each worker gets a value of its own where the range has
enough. Each group's assignment is a function of its members alone (``expr.balance.place``),
recomputed when a member comes or goes; the definitions of members whose values moved are handed
back, to be built again.

A million balanced entries start within seconds (docs/design.md §16), so what is kept per entry
is plain: its definition, group, key and slot (an int) in dicts by name, no record of its own;
the placed schedules go to the build by name, and the store keeps each group's entries and
slots as two flat lists.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, NamedTuple

from celery_hashbeat.entries.building import as_definition
from celery_hashbeat.expr import CronSyntaxError
from celery_hashbeat.expr.balance import Term, offsets_at, place, shape_of, terms_of
from celery_hashbeat.expr.seeding import Key
from celery_hashbeat.schedules import hashcron


class Group:
    """Balanced entries that compete for the same slots, and the slot each of them holds."""

    __slots__ = (
        "alike",
        "identity",
        "keyed",
        "keys",
        "sizes",
        "slot_of",
        "template",
        "templates",
        "terms",
        "tight",
    )

    def __init__(self, identity: Hashable, terms: tuple[Term, ...], tight: bool) -> None:
        self.identity = identity
        self.terms = terms
        self.sizes = tuple(term.count for term in terms)
        self.tight = tight
        #: Member -> the key its hash terms draw from (set here for a member keyed by its name,
        #: through ``join`` for any other).
        self.keys: dict[str, Key] = {}
        #: How many members draw from a key other than their name (without any, the keys
        #: are distinct).
        self.keyed = 0
        #: The schedule the members' placed schedules are made from (the first given), and what
        #: makes another alike to it (``alike``): placing a member asks nothing of its own.
        self.template: hashcron | None = None
        self.alike: tuple[Any, ...] = ()
        #: Member -> the schedule its placed schedules are made from, for the few members whose
        #: schedules are not alike to ``template`` (a key of its own, another spelling).
        self.templates: dict[str, hashcron] = {}
        #: Member -> its slot (``expr.balance.offsets_at``), as last placed: members that left
        #: are kept until the group is placed again.
        self.slot_of: dict[str, int] = {}

    def join(self, name: str, key: Key) -> None:
        """Add member ``name``, whose hash terms draw from ``key``."""
        self.keys[name] = key
        self.keyed += key != name

    def leave(self, name: str) -> None:
        """Take member ``name`` out (it keeps its slot until the group is placed again)."""
        self.keyed -= self.keys.pop(name) != name
        self.templates.pop(name, None)

    def offsets_of(self, slots: list[int]) -> list[tuple[int, ...]]:
        """The offsets of each of ``slots``: one tuple per slot, however many members hold it."""
        total = math.prod(self.sizes)
        table: Mapping[int, tuple[int, ...]] | list[tuple[int, ...]]
        if total <= len(slots):
            table = [offsets_at(slot, self.sizes) for slot in range(total)]
        else:
            table = {slot: offsets_at(slot, self.sizes) for slot in set(slots)}
        return list(map(table.__getitem__, slots))

    def replace(self, fresh: set[str]) -> tuple[list[str], list[int]]:
        """Place the members afresh; those that moved, came, or are in ``fresh`` (given a new
        definition), and their slots, in the order they joined."""
        names = list(self.keys)
        if self.keyed:  # members that share a key share its slot
            keys = list(self.keys.values())
            distinct = list(dict.fromkeys(keys))
            found = dict(zip(distinct, place(distinct, self.terms, tight=self.tight), strict=True))
            slots = list(map(found.__getitem__, keys))
        else:
            slots = place(names, self.terms, tight=self.tight)
        before, self.slot_of = self.slot_of, dict(zip(names, slots, strict=True))
        if before:
            moved = [
                at
                for at, (name, slot) in enumerate(zip(names, slots, strict=True))
                if before.get(name) != slot or name in fresh
            ]
            names, slots = [names[at] for at in moved], [slots[at] for at in moved]
        return names, slots


class Placed(NamedTuple):
    """What the balancer hands back: the schedules of balanced entries at their offsets, by
    name, and the definitions of entries not given whose values moved, to be built again."""

    schedules: dict[str, hashcron]
    moved: dict[str, Mapping[str, Any]]


class Balancer:
    """The balanced entries of one schedule and the values assigned to them."""

    def __init__(self, default: bool, zone: str, parents: Mapping[str, str]) -> None:
        self.default = default
        self.zone = zone
        #: Copy on a worker -> the entry it copies (``FanOut.parents``).
        self.parents = parents
        #: Balanced entry -> its definition, as given.
        self.definitions: dict[str, Mapping[str, Any]] = {}
        #: Balanced entry -> its group.
        self.group_of: dict[str, Group] = {}
        self._groups: dict[Hashable, Group] = {}
        #: Counts the changes to the assignment, so that a leader stores each one once.
        self.version = 0
        #: Placed schedules, shared by the entries whose schedules and offsets agree.
        self._schedules: dict[tuple[Any, ...], hashcron] = {}

    @property
    def offsets(self) -> dict[str, tuple[int, ...]]:
        """Balanced entry -> the offsets of its hash terms now."""
        offsets: dict[str, tuple[int, ...]] = {}
        for group in self._groups.values():
            slot_of = group.slot_of
            offsets.update(zip(slot_of, group.offsets_of(list(slot_of.values())), strict=True))
        return offsets

    def take(self, definitions: Mapping[str, Any]) -> Placed:
        """Take ``definitions`` (added or replaced): the schedules of the balanced ones, and
        of others whose values moved, with those others' definitions."""
        touched: set[Group] = set()
        fresh: set[str] = set()
        group_of, kept, parents = self.group_of, self.definitions, self.parents
        #: What a placed schedule keeps of its member's, and the parent -> the group and the
        #: member's template (None: the group's own), or None: found once per kind.
        kinds: dict[tuple[Any, ...], tuple[Group, hashcron | None] | None] = {}
        #: Whether any entry is balanced yet: at start none is, and none need be looked up.
        rebuilding = bool(group_of)
        for name, definition in definitions.items():
            if rebuilding and name in group_of:
                touched.add(self._forget(name))
                fresh.add(name)
            mapping = definition if type(definition) is dict else as_definition(definition)
            if mapping is None:
                continue
            given = mapping.get("schedule")
            if not isinstance(given, hashcron) or not isinstance(given.expr, str):
                continue  # building the entry reports a bad expression, by name
            parent = parents.get(name)
            alike = alike_of(given)
            kind = (alike, parent)
            try:
                found = kinds.get(kind)
            except TypeError:  # an unhashable key, zone or exclude: building the entry says so
                continue
            if found is None:
                if kind in kinds:
                    continue
                found = kinds[kind] = self._kind(given, alike, parent)
                if found is None:
                    continue
            group, template = found
            if template is not None:
                group.templates[name] = template
            if given.key is None:
                group.keys[name] = name
            else:
                group.join(name, given.key)
            group_of[name] = group
            kept[name] = mapping
        touched.update(found[0] for found in kinds.values() if found is not None)
        return self._assign(touched, fresh, definitions if rebuilding else None)

    def drop(self, names: Iterable[str]) -> Placed:
        """Forget entries that left the schedule; the schedules and definitions of those whose
        values moved."""
        group_of = self.group_of
        return self._assign({self._forget(name) for name in names if name in group_of}, set(), {})

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

    def _kind(
        self, given: hashcron, alike: tuple[Any, ...], parent: str | None
    ) -> tuple[Group, hashcron | None] | None:
        """The group of the balanced entries whose schedules are ``alike`` to ``given`` (copies
        of ``parent``, if given), and their template: None for the group's own; None when they
        are not balanced."""
        zone = None if given.zone is None else str(given.zone)
        group = self._group(given.expr, zone, given.day_and, given.balanced, parent)
        if group is None:
            return None
        if group.template is None:
            group.template, group.alike = given, alike
        return group, None if alike == group.alike else given

    def _group(
        self,
        expression: str,
        zone: str | None,
        day_and: bool,
        balanced: bool | None,
        parent: str | None,
    ) -> Group | None:
        """The group of the entries with these schedules (copies of ``parent``, if given);
        None when they are not balanced."""
        if not (self.default if balanced is None else balanced):
            return None
        try:
            terms, shape = terms_of(expression), shape_of(expression)
        except CronSyntaxError:
            return None  # building the entry reports it, by name
        if not terms:
            return None
        identity = (shape, self.zone if zone is None else zone, day_and, parent)
        group = self._groups.get(identity)
        if group is None:
            group = self._groups[identity] = Group(identity, terms, parent is not None)
        return group

    def _forget(self, name: str) -> Group:
        """Take out a member; its group."""
        group = self.group_of.pop(name)
        group.leave(name)
        del self.definitions[name]
        self.version += 1
        return group

    def _assign(
        self, groups: set[Group], fresh: set[str], given: Mapping[str, Any] | None
    ) -> Placed:
        """Place the ``groups`` afresh: the schedules of the members that moved or came, and
        of the ``fresh`` ones; the definitions of those moved that are not ``given`` (None:
        every member was, as at start)."""
        definitions = self.definitions
        placed = Placed({}, {})
        placed_schedules, moved = placed
        for group in groups:
            if not group.keys:
                del self._groups[group.identity]
                continue
            names, slots = group.replace(fresh)
            # A member's placed schedule is its template's at its slot: made once per distinct
            # slot and handed out by C-level maps (a million members at start); then the few
            # members whose schedules differ from the template get their own.
            own = group.template
            assert own is not None  # set with the first member
            by_slot = {slot: self._placed(own, group, slot) for slot in set(slots)}
            placed_schedules.update(zip(names, map(by_slot.__getitem__, slots), strict=True))
            slot_of = group.slot_of
            for name, template in group.templates.items():
                if name in placed_schedules:
                    placed_schedules[name] = self._placed(template, group, slot_of[name])
            if given is not None:
                moved.update([(name, definitions[name]) for name in names if name not in given])
        self.version += bool(placed_schedules)
        return placed

    def _placed(self, template: hashcron, group: Group, slot: int) -> hashcron:
        """``template`` at ``slot`` of ``group``: one object per schedule and offsets, kept, so
        that a member placed again at its slot keeps the schedule it had."""
        offsets = offsets_at(slot, group.sizes)
        identity = (*template._identity(), offsets)
        found = self._schedules.get(identity)
        if found is None:
            found = self._schedules[identity] = template.placed(offsets)
        return found


def alike_of(given: hashcron) -> tuple[Any, ...]:
    """What makes two schedules place alike: what a placed schedule keeps of its member's
    (``hashcron._identity`` but the offsets), and its kind."""
    return (
        type(given),
        given.expr,
        given.zone,
        given.day_and,
        given.balanced,
        given.key,
        given.exclude,
        given.on_excluded,
    )


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
