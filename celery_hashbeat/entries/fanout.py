"""Per-worker fan-out (docs/design.md §11): the worker's node name in the hash.

An entry with ``"workers": [...]`` or ``"workers": "*"`` runs once per worker: it becomes one
sub-entry per node, named and keyed ``"<entry>@<node>"`` (so a hashed schedule gives each worker
its own slot, docs/design.md §3) and published to that worker's direct queue only. ``"*"`` means
every live worker: the leader asks Celery's remote control which workers answer, at most once per
``hashbeat_workers_refresh``, on a thread of its own, and keeps the answer in the store so that
every beat fans out alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from operator import contains
from typing import Any

from celery.utils.nodenames import worker_direct

from celery_hashbeat._logs import FANOUT
from celery_hashbeat.entries.errors import FanOutError

logger = FANOUT

#: ``"workers": "*"``: every worker that answers the leader's ping.
EVERY_WORKER = "*"

#: Options that would send a sub-entry somewhere other than its worker's direct queue.
ROUTING_OPTIONS = ("queue", "exchange", "routing_key")


def sub_name(entry: str, node: str) -> str:
    """The name, and hash key, of ``entry``'s copy for worker ``node``."""
    return f"{entry}@{node}"


def fanned_nodes(name: str, definition: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The nodes an entry lists, or None for ``"*"``; checked, with errors naming the entry."""
    workers = definition["workers"]
    options = definition.get("options") or {}
    routed = [key for key in ROUTING_OPTIONS if isinstance(options, Mapping) and key in options]
    if routed:
        raise FanOutError(
            f"entry {name!r}: 'workers' sends each copy to its worker's direct queue, so options "
            f"{routed} cannot apply: remove them, or remove 'workers'"
        )
    if workers == EVERY_WORKER:
        return None
    if isinstance(workers, str) or not isinstance(workers, Iterable):
        raise FanOutError(
            f"entry {name!r}: 'workers' must be \"*\" (every live worker) or a list of node "
            f'names such as ["celery@web-1"], not {workers!r}'
        )
    nodes = list(workers)
    for node in nodes:
        if not isinstance(node, str) or node.count("@") != 1 or node.startswith("@"):
            raise FanOutError(
                f"entry {name!r}: 'workers' lists {node!r}, which is not a worker node name: "
                f'write it as Celery prints it at start, e.g. "celery@web-1"'
            )
    duplicated = sorted({node for node in nodes if nodes.count(node) > 1})
    if duplicated:
        raise FanOutError(f"entry {name!r}: 'workers' lists {duplicated} more than once")
    return tuple(nodes)


def fan_out(
    name: str, definition: Mapping[str, Any], nodes: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """The sub-entry definitions of ``definition`` for ``nodes``: each as the entry, sent only
    to its worker's direct queue."""
    base = {key: value for key, value in definition.items() if key != "workers"}
    options = dict(definition.get("options") or {})
    return {
        sub_name(name, node): {**base, "options": {**options, "queue": worker_direct(node)}}
        for node in nodes
    }


def _none_fanned(schedule: Mapping[str, Any]) -> bool:
    """Whether every definition is a dict without ``workers``: asked by C-level maps, with no
    Python step per definition."""
    definitions = schedule.values()
    return set(map(type, definitions)) <= {dict} and not any(
        map(contains, definitions, repeat("workers"))
    )


@dataclass
class Expansion:
    """What a change to the schedule or to the live workers means for the entries."""

    #: Definitions to build: the schedule's, with sub-entries in place of fanned entries.
    plain: dict[str, Any] = field(default_factory=dict)
    #: Fanned entries that cannot be fanned out: name -> the error, naming the entry.
    broken: dict[str, str] = field(default_factory=dict)
    #: Sub-entries that no longer exist (their entry changed, or their worker left).
    gone: set[str] = field(default_factory=set)


class FanOut:
    """The schedule's fanned-out entries and the sub-entries they stand for."""

    def __init__(self) -> None:
        #: Fanned entry -> its definition, for the entries with ``"workers": "*"``.
        self.every_worker: dict[str, Mapping[str, Any]] = {}
        #: Fanned entry -> the names of its sub-entries now.
        self.subs: dict[str, set[str]] = {}
        #: Sub-entry -> its fanned entry: the reverse of ``subs``, asked once per entry (the
        #: balancer reads it for each of a million entries at start: a dict, not a call).
        self.parents: dict[str, str] = {}
        #: The live workers last known (the store's roster), or None before any census.
        self.nodes: tuple[str, ...] | None = None

    def expand(self, schedule: Mapping[str, Any]) -> Expansion:
        """Take in a beat_schedule mapping (all of it, or entries added to it)."""
        result = Expansion()
        if not self.subs and _none_fanned(schedule):  # a million plain entries at start
            result.plain.update(schedule)
            return result
        for name, definition in schedule.items():
            before = self.subs.get(name)
            self._take(name, definition, result)
            if before:  # copies it had that it has no more
                result.gone |= before - self.subs.get(name, set())
        return result

    def _take(self, name: str, definition: Any, result: Expansion) -> None:
        mapping = type(definition) is dict or isinstance(definition, Mapping)
        if not mapping or "workers" not in definition:
            result.plain[name] = definition
            if name in self.subs:  # no longer fanned out (every "*" entry has its subs)
                self._forget(name)
            return
        try:
            listed = fanned_nodes(name, definition)
        except FanOutError as exc:
            result.broken[name] = str(exc)
            self._forget(name)
            return
        if listed is None:
            self.every_worker[name] = definition
        else:
            self.every_worker.pop(name, None)
        subs = fan_out(name, definition, (self.nodes or ()) if listed is None else listed)
        self._set_subs(name, subs)
        result.plain.update(subs)

    def _set_subs(self, name: str, subs: Iterable[str]) -> None:
        self._forget_subs(name)
        self.subs[name] = set(subs)
        self.parents.update(dict.fromkeys(self.subs[name], name))

    def _forget_subs(self, name: str) -> None:
        for sub in self.subs.pop(name, ()):
            self.parents.pop(sub, None)

    def _forget(self, name: str) -> None:
        self.every_worker.pop(name, None)
        self._forget_subs(name)

    def drop(self, names: Iterable[str]) -> None:
        """Forget fanned entries removed from the schedule."""
        for name in names:
            self._forget(name)

    def parent_of(self, name: str) -> str | None:
        """The fanned entry that ``name`` is a copy of, or None for any other entry."""
        return self.parents.get(name)

    def is_dynamic(self, name: str) -> bool:
        """Whether entry ``name`` is a sub-entry that comes and goes with the live workers."""
        return any(name in self.subs.get(parent, ()) for parent in self.every_worker)

    def regroup(self, nodes: tuple[str, ...]) -> Expansion:
        """Take a new roster: every ``"*"`` entry fanned out to ``nodes``, with one log line
        per worker that joined or left since the last roster."""
        if self.nodes is not None:
            for node in sorted(set(nodes) - set(self.nodes)):
                logger.info('beat: worker %s joined: its copies of the "*" entries start', node)
            for node in sorted(set(self.nodes) - set(nodes)):
                logger.info('beat: worker %s left: its copies of the "*" entries stop', node)
        self.nodes = nodes
        result = Expansion()
        for name, definition in self.every_worker.items():
            subs = fan_out(name, definition, nodes)
            result.gone |= self.subs.get(name, set()) - set(subs)
            self._set_subs(name, subs)
            result.plain.update(subs)
        return result
