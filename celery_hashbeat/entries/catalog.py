"""The schedule's entries, as beat_schedule, the live workers and the balancer make them.

A Catalog turns definitions into entries: fanned-out entries into their copies (DESIGN.md §11),
balanced hashcron entries placed by the balancer (§16), each built and checked; an entry that
cannot run is logged by name and skipped, the others run. It knows nothing of the lease or the
store: what becomes of a new entry is the caller's (``added``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from celery.utils.log import get_logger

from celery_hashbeat.entries.balancing import Balancer
from celery_hashbeat.entries.building import build_entry
from celery_hashbeat.entries.entry import Entry
from celery_hashbeat.entries.errors import EntryError
from celery_hashbeat.entries.fanout import FanOut
from celery_hashbeat.entries.sharing import SharedSlots, schedule_digest

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.settings import Settings

logger = get_logger("celery_hashbeat.scheduler")


class Catalog:
    """Every entry of one scheduler, by name, and the configured ones that cannot run."""

    def __init__(
        self,
        app: Celery,
        settings: Settings,
        now: Callable[[], int],
        added: Callable[[Entry, int], None],
    ) -> None:
        self.settings = settings
        self.entries: dict[str, Entry] = {}
        #: Names of configured entries that could not run: their fences are kept.
        self.broken: set[str] = set()
        self.shared = SharedSlots(app)
        self.fanout = FanOut()
        self.balancer = Balancer(settings.balance, str(app.timezone), self.fanout.parent_of)
        self._now = now
        self._added = added
        #: The configuration's entries (beat_schedule and Celery's own), by name.
        self.configured: dict[str, Any] = {}
        #: The entries kept in the store (DESIGN.md §13), by name; a name the configuration
        #: also has is the configuration's.
        self.stored: dict[str, Any] = {}

    def merge(self, schedule: Mapping[str, Any]) -> None:
        """Take ``schedule`` as the whole configuration: entries not in it (nor in the store)
        leave."""
        self.configured = dict(schedule)
        for name in self.stored.keys() & self.configured.keys():
            logger.error(
                "beat: the store entry %r has the name of a beat_schedule entry, which wins; "
                "remove the store entry (`hashbeat remove %s`) or rename one of them",
                name,
                name,
            )
        everything = {**self.stored, **self.configured}
        self.fanout.drop([name for name in self.fanout.subs if name not in everything])
        plain = self._expand(everything)
        self.deactivate([name for name in self.entries if name not in plain])
        if self.broken:
            self.broken.intersection_update({*plain, *everything})
        self._build(plain)

    def update(self, definitions: Mapping[str, Any]) -> None:
        """Add or replace entries of the configuration."""
        self.configured.update(definitions)
        self._build(self._expand(definitions))

    def restock(self, changed: Mapping[str, Any | None], full: bool) -> list[str]:
        """Take the store entries changed (None: removed, or unreadable); ``full`` means every
        store entry is in ``changed``. Returns the entries taken out."""
        if full:
            changed = {**dict.fromkeys(self.stored), **changed}
        for name, definition in changed.items():
            if definition is None:
                self.stored.pop(name, None)
            else:
                self.stored[name] = definition
        mine = {name: d for name, d in changed.items() if name not in self.configured}
        gone = [name for name, definition in mine.items() if definition is None]
        doomed = [n for g in gone for n in (g, *self.fanout.subs.get(g, ())) if n in self.entries]
        self.fanout.drop(gone)
        self.deactivate(doomed)
        self._build(self._expand({n: d for n, d in mine.items() if d is not None}))
        return doomed

    def regroup(self, nodes: tuple[str, ...]) -> set[str]:
        """Fan the ``"*"`` entries out to ``nodes``; the copies of workers that left."""
        expansion = self.fanout.regroup(nodes)
        self.deactivate(expansion.gone)
        self._build(expansion.plain)
        return expansion.gone

    def deactivate(self, names: Iterable[str]) -> None:
        """Take entries out; their places in the scheduler's queue are skipped. Balanced entries
        whose values move with their departure are built again."""
        names = list(names)
        for name in names:
            old = self.entries.pop(name, None)
            if old is not None:
                old.active = False
        moved = self.balancer.drop(names)
        if moved:
            self._build(moved)

    def digest(self) -> str:
        """What this beat runs, in a few characters. Copies on every live worker are left out:
        beats that have not seen the same census still run the same configuration."""
        entries = self.entries
        if self.fanout.every_worker:
            dynamic = self.fanout.is_dynamic
            entries = {name: entry for name, entry in entries.items() if not dynamic(name)}
        return schedule_digest(entries)

    def _expand(self, schedule: Mapping[str, Any]) -> dict[str, Any]:
        """``schedule`` with each fanned-out entry replaced by its copies; one that cannot be
        fanned out is logged by name and skipped."""
        expansion = self.fanout.expand(schedule)
        for name, error in expansion.broken.items():
            logger.error("beat: skipping %s", error)
            self.broken.add(name)
        self.deactivate(expansion.gone)
        return expansion.plain

    def _build(self, definitions: Mapping[str, Any]) -> None:
        now = self._now()
        failed = []
        for name, definition in self.balancer.take(definitions).items():
            try:
                entry = build_entry(name, definition, self.settings, self.shared, now)
            except EntryError as exc:
                logger.error("beat: skipping %s", exc)
                self.broken.add(name)
                failed.append(name)
                continue
            self.broken.discard(name)
            current = self.entries.get(name)
            if current is not None:
                if current.same_as(entry):
                    continue
                current.active = False
                # A changed entry is the same entry: its runs so far still count.
                entry.last_slot, entry.total_run_count = current.last_slot, current.total_run_count
            self.entries[name] = entry
            self._added(entry, now)
        if failed:
            self.deactivate(failed)
