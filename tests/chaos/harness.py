"""Real beats against one store, a recorder on the broker, and the checks every scenario ends with.

Shared by the chaos tests and ``benchmarks/failover.py``, so that both start, find, kill and judge
beats the same way. The expected slots come from the engine (``parse(...).next_timestamp`` and
the seeding of §3), never from the scheduler under test.
"""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from kombu import Queue

from celery_hashbeat import hashcron, hashinterval, parse
from celery_hashbeat.expr.seeding import draw
from celery_hashbeat.expr.slots import to_ms
from celery_hashbeat.store import StoreError, open_store
from tests.chaos.app import schedule_for
from tests.support.broker import Delivery, Recorder
from tests.support.processes import Process, ProcessGroup, celery_beat_args, wait_until

#: The beat's line for a slot whose publish may or may not have reached the broker.
AMBIGUOUS = re.compile(r"beat: (\S+) slot (\S+) may or may not have reached the broker")
#: The beat's line for a backfilled slot that may not have gone out, or never can.
BACKFILL_LOST = re.compile(
    r"beat: backfill \S+ of (\S+): slot (\S+) (?:may not have gone out|cannot be sent)"
)
#: The beat's line for the rest of a backfill it may not have put back in the store's queue.
BACKFILL_UNQUEUED = re.compile(
    r"beat: backfill \S+ of (\S+) may not be back in the store's queue[^\n]*? the slots "
    r"from (\S+) to (\S+) may not be sent"
)

APP = "tests.chaos.app"

#: Task ids are uuid5 of "<entry>|<slot ms>" in this namespace (docs/design.md §5); written out here
#: rather than imported, so the test notices if the scheduler's constant ever moves.
TASK_ID_NAMESPACE = uuid.UUID("46f53fda-c94e-4ed5-bf27-9d8b09c0a1e3")

MS = timedelta(milliseconds=1)


# The oracle: slots from the engine -------------------------------------------------------------


@cache
def _cron(expr: str, key: str, day_and: bool) -> Any:
    return parse(expr, key, tz="UTC", day_and=day_and)


def next_slot(name: str, schedule: object, after: int) -> int:
    """The first slot of entry ``name`` strictly after ``after`` (UTC epoch ms).

    A plain timedelta chains each slot from the one before, so for it ``after`` must be a slot.
    """
    if isinstance(schedule, hashcron):
        key = name if schedule.key is None else schedule.key
        assert schedule.zone in (None, "UTC"), "the oracle reads chaos schedules in UTC"
        return (
            int(_cron(schedule.expr, str(key), schedule.day_and).next_timestamp(after / 1000))
            * 1000
        )
    if isinstance(schedule, hashinterval):
        period = schedule.every // MS
        offset = draw(name if schedule.key is None else schedule.key, "interval", 0) % period
        return after - (after - offset) % period + period
    if isinstance(schedule, timedelta):
        return after + schedule // MS
    raise TypeError(f"the oracle does not know {schedule!r}")


def task_id(entry: str, slot: int) -> str:
    return str(uuid.uuid5(TASK_ID_NAMESPACE, f"{entry}|{slot}"))


def problems(
    deliveries: Sequence[Delivery],
    schedule: Mapping[str, Mapping[str, Any]],
    *,
    catch_up_all: bool,
    wipes: Sequence[float] = (),
    until: float | None = None,
    fences: Mapping[str, int] | None = None,
    ambiguous: frozenset[tuple[str, int]] = frozenset(),
) -> list[str]:
    """Everything the recorded enqueues violate, one line each (empty means all is well).

    - no (entry, slot) twice, and each task id is uuid5 of (entry, slot);
    - every slot is one of the entry's slots;
    - with ``catch_up_all``, none of the entry's slots missing between its first and last recorded
      one. ``wipes`` (epoch seconds) are moments the store lost its memory (a restarted Redis
      without persistence): an entry then starts afresh (docs/design.md §5: a new entry waits for
      its next slot), so each store lifetime is checked on its own;
    - if the beats ran ``until`` (epoch seconds), every entry enqueued and kept going to the end:
      its next slot after the last recorded one was not due a second before then;
    - every fence left in the store (``fences``, entry -> last claimed slot) was enqueued: a slot
      claimed and never published is lost for good, whatever the catch-up mode.

    ``ambiguous`` (entry, slot) pairs are slots a beat logged as "may or may not have reached the
    broker" (a connection lost mid-publish): at most once allows them to be missing, and only
    them.
    """
    found: list[str] = []
    counts = Counter((d.entry, d.slot) for d in deliveries)
    for (entry, slot), count in sorted(counts.items()):
        if count > 1:
            senders = [
                (d.origin, round(d.received, 3))
                for d in deliveries
                if (d.entry, d.slot) == (entry, slot)
            ]
            found.append(f"duplicate: {entry} slot {slot} enqueued {count} times by {senders}")
    for d in deliveries:
        if d.task_id != task_id(d.entry, d.slot):
            found.append(f"task id {d.task_id} of {d.entry} slot {d.slot} is not uuid5(entry|slot)")
    lifetimes: dict[tuple[str, int], set[int]] = defaultdict(set)
    for entry, slot in counts:
        if entry not in schedule:
            found.append(f"unknown entry {entry!r} (slot {slot})")
            continue
        lifetime = sum(1 for wipe in wipes if slot > wipe * 1000)
        lifetimes[entry, lifetime].add(slot)
    unpublished = sorted(
        (e, s)
        for e, s in (fences or {}).items()
        if (e, s) not in counts and (e, s) not in ambiguous
    )
    if unpublished:
        found.append(
            f"lost: {len(unpublished)} slot(s) claimed in the store but never enqueued, "
            f"e.g. {unpublished[:5]}"
        )
    if until is not None:
        found += _stalled(schedule, counts, until)
    for (entry, lifetime), slots in sorted(lifetimes.items()):
        expected = set(_walk(entry, schedule[entry]["schedule"], min(slots), max(slots)))
        off = sorted(slots - expected)
        if off:
            found.append(
                f"{entry}: slots {off} are not slots of its schedule (lifetime {lifetime})"
            )
        missing = sorted(slot for slot in expected - slots if (entry, slot) not in ambiguous)
        if catch_up_all and missing:
            found.append(
                f"lost: {entry} never enqueued {len(missing)} slot(s) {missing[:10]} between "
                f"{min(slots)} and {max(slots)} (lifetime {lifetime})"
            )
    return found


def backfill_problems(
    deliveries: Sequence[Delivery],
    asked: Mapping[str, set[int]],
    lost: frozenset[tuple[str, int]] = frozenset(),
) -> list[str]:
    """What the enqueues of entries that only backfills send (``asked``: entry -> the slots of
    every backfill asked of it) violate: each slot at most once, only slots asked for, and every
    slot asked for at least once unless a beat logged it ``lost``."""
    found: list[str] = []
    counts = Counter((d.entry, d.slot) for d in deliveries if d.entry in asked)
    for (entry, slot), count in sorted(counts.items()):
        if count > 1:
            found.append(f"duplicate: backfilled {entry} slot {slot} enqueued {count} times")
        if slot not in asked[entry]:
            found.append(f"{entry} slot {slot} enqueued, though no backfill asked for it")
    for entry, slots in sorted(asked.items()):
        missing = sorted(s for s in slots if (entry, s) not in counts and (entry, s) not in lost)
        if missing:
            found.append(
                f"lost: backfills of {entry} never enqueued {len(missing)} slot(s) "
                f"{missing[:10]}, nor did a beat log them as perhaps lost"
            )
    return found


def _stalled(
    schedule: Mapping[str, Mapping[str, Any]], counts: Mapping[tuple[str, int], int], until: float
) -> list[str]:
    """Entries that never enqueued, or whose next slot was due a second before ``until``."""
    found = []
    for entry in schedule:
        last = max((slot for name, slot in counts if name == entry), default=None)
        if last is None:
            found.append(f"{entry}: never enqueued")
            continue
        due = next_slot(entry, schedule[entry]["schedule"], last)
        if due < (until - 1) * 1000:
            found.append(
                f"{entry}: stopped enqueueing after slot {last}; {due} was due before the end"
            )
    return found


def _walk(name: str, schedule: object, first: int, last: int) -> Iterable[int]:
    slot = first
    while slot <= last:
        yield slot
        slot = next_slot(name, schedule, slot)


# The cluster ----------------------------------------------------------------------------------


def token_pid(token: str) -> int:
    """The pid in a lease token ``hostname:pid:random``."""
    return int(token.rsplit(":", 2)[1])


@dataclass(frozen=True)
class Takeover:
    """How long the beats took to replace a leader, from the fault (seconds)."""

    fault: str
    victim: int
    lease: float | None  # until the store named another leader
    enqueue: float | None  # until another beat's first message reached the broker

    def describe(self) -> str:
        def seconds(value: float | None) -> str:
            return "never" if value is None else f"{value:.3f}s"

        return f"new lease after {seconds(self.lease)}, first enqueue after {seconds(self.enqueue)}"


class Cluster:
    """Beats running ``tests.chaos.app`` against one store and broker, watched through the store
    (who leads, who heartbeats) and through a Recorder (what was enqueued, by whom, when)."""

    def __init__(
        self,
        processes: ProcessGroup,
        *,
        broker_url: str,
        store_url: str,
        prefix: str,
        queue: str,
        ttl: float,
        catch_up: str = "all",
        schedule: str = "chaos",
        env: Mapping[str, str] | None = None,
        loglevel: str = "INFO",
        also: Sequence[Queue] = (),
    ) -> None:
        self.processes = processes
        self.loglevel = loglevel
        self.workdir: Path = processes.workdir
        self.ttl = ttl
        self.catch_up = catch_up
        self.schedule = schedule_for(schedule)
        self.env = {
            "HASHBEAT_CHAOS_BROKER": broker_url,
            "HASHBEAT_CHAOS_STORE": store_url,
            "HASHBEAT_CHAOS_PREFIX": prefix,
            "HASHBEAT_CHAOS_QUEUE": queue,
            "HASHBEAT_CHAOS_TTL": str(ttl),
            "HASHBEAT_CHAOS_CATCH_UP": catch_up,
            "HASHBEAT_CHAOS_SCHEDULE": schedule,
            **(env or {}),
        }
        self.recorder = Recorder(broker_url, queue, also)
        self.store = open_store(store_url, prefix)
        self.beats: list[Process] = []
        self.exits: dict[str, int | None] = {}
        self.timeline: list[tuple[float, str]] = []
        self.wipes: list[float] = []
        self.stopped_at: float | None = None
        self.fences: dict[str, int] | None = None
        self._started = 0

    # Running beats

    def start(self, beats: int = 3) -> Cluster:
        self.recorder.start()
        for _ in range(beats):
            self.add_beat()
        return self

    def add_beat(self) -> Process:
        self._started += 1
        name = f"beat-{self._started}"
        args = celery_beat_args(APP, self.workdir, name, loglevel=self.loglevel)
        beat = self.processes.start(name, args, self.env)
        self.beats.append(beat)
        self.note(f"started {name} pid {beat.pid}")
        return beat

    def gone(self, beat: Process, replace: bool = True) -> None:
        """``beat`` was killed or stopped: forget it and, as a supervisor would, start another."""
        self.beats.remove(beat)
        self.exits[beat.name] = beat.wait(10)
        if replace:
            self.add_beat()

    def note(self, text: str) -> float:
        now = time.time()
        self.timeline.append((now, text))
        return now

    def stop(self, timeout: float = 10.0) -> dict[str, int | None]:
        """SIGTERM every beat at once, as a deployment stop does; their exit codes (None: did not
        exit within ``timeout``). It strikes between ticks, as the faults do. Then let the broker
        drain, stop recording and read the fences the beats left."""
        self.quiet_moment()
        self.stopped_at = self.note("stopping every beat with SIGTERM")
        for beat in self.beats:
            beat.terminate()
        codes = {beat.name: beat.wait(timeout) for beat in self.beats}
        self.exits.update(codes)
        self.quiet_broker()
        self.recorder.stop()
        self.fences = self.store.last_slots()
        self.store.close()
        return codes

    def close(self) -> None:
        """Whatever state a failed test left: stop recording and release the store."""
        self.recorder.stop()
        self.store.close()

    # Watching

    def leader_token(self) -> str | None:
        try:
            lease = self.store.leader()
        except StoreError:
            return None
        return lease.token if lease else None

    def beat(self, pid: int | None) -> Process | None:
        return next((beat for beat in self.beats if beat.pid == pid), None)

    def steady(self, timeout: float = 30.0, fenced: bool = True) -> Process:
        """Wait until one of our beats leads and has enqueued within the last 1.5 s, every beat
        heartbeats and, if ``fenced``, every entry has a fence (so a failover must catch up every
        one of them, not start it afresh); the leader."""
        found: list[Process] = []

        def settled() -> bool:
            token = self.leader_token()
            leader = self.beat(token_pid(token)) if token else None
            if leader is None:
                return False
            recent = time.time() - 1.5
            if not any(
                d.pid == leader.pid and d.received > recent for d in self.recorder.deliveries()
            ):
                return False
            try:
                seen = {token_pid(info.token) for info in self.store.beats()}
                missing = (
                    len(self.schedule) - len(self.store.last_slots(self.schedule)) if fenced else 0
                )
            except StoreError:
                return False
            if missing or not {beat.pid for beat in self.beats} <= seen:
                return False
            found.append(leader)
            return True

        if not wait_until(settled, timeout, interval=0.05):
            raise AssertionError(f"no steady leader within {timeout}s\n{self.diagnostics()}")
        return found[-1]

    def takeover(self, fault: str, victim: Process, since: float, timeout: float) -> Takeover:
        """Measure the time from ``since`` (the fault) until the store names a leader other than
        ``victim`` and until another beat's first message arrives."""
        lease_at: float | None = None
        enqueue_at: float | None = None
        deadline = since + timeout
        while (lease_at is None or enqueue_at is None) and time.time() < deadline:
            if lease_at is None:
                token = self.leader_token()
                if token and token_pid(token) != victim.pid:
                    lease_at = time.time()
            if enqueue_at is None:
                enqueue_at = next(
                    (
                        d.received
                        for d in self.recorder.deliveries()
                        if d.received >= since and d.pid != victim.pid
                    ),
                    None,
                )
            time.sleep(0.005)
        result = Takeover(
            fault,
            victim.pid,
            None if lease_at is None else lease_at - since,
            None if enqueue_at is None else enqueue_at - since,
        )
        self.note(f"takeover after {fault}: {result.describe()}")
        return result

    def enqueued_after(self, since: float, timeout: float) -> float | None:
        """Seconds from ``since`` to the first message that arrived after it, or None."""
        found = self.recorder.wait_for(
            lambda ds: next((d.received for d in ds if d.received > since), None), timeout
        )
        return None if found is None else found - since

    def quiet_moment(self, before_ms: int = 50, after_ms: int = 150) -> None:
        """Sleep until no entry has a slot within [-before_ms, +after_ms] of now (or, if slots
        are too dense for that within 1.5 s, until the moment furthest from them).

        SIGKILL between a claim and its publish loses the claimed slots: at-most-once by design
        (docs/design.md §5). The scenarios test failover, so they strike between ticks; a clean stop
        in mid-dispatch has a test of its own. After an outage the leader sends what it owes
        whatever the schedule says, so first wait until every fenced slot has arrived.
        """
        self.drained()
        now = time.time() * 1000
        last: dict[str, int] = {}
        for d in self.recorder.deliveries():
            if d.entry in self.schedule:  # not an entry judged apart (only backfills send it)
                last[d.entry] = max(d.slot, last.get(d.entry, d.slot))
        upcoming: list[int] = []
        for name, anchor in last.items():
            slot = anchor
            while slot < now + 2000:
                slot = next_slot(name, self.schedule[name]["schedule"], slot)
                upcoming.append(slot)

        def clearance(moment: float) -> float:
            """How far outside every slot's window ``moment`` is (negative: inside one)."""
            return min(
                (max(slot - before_ms - moment, moment - slot - after_ms) for slot in upcoming),
                default=1.0,
            )

        candidates = [now + 10 + 5 * step for step in range(300)]
        moment = next((m for m in candidates if clearance(m) > 0), None)
        if moment is None:
            moment = max(candidates, key=clearance)
        time.sleep(max(0.0, (moment - time.time() * 1000) / 1000))

    def drained(self, timeout: float = 15.0) -> None:
        """Wait until the slot of every entry's fence has reached the broker: the leader is no
        longer working off claims it made during a fault (a catch-up batch, a hung publish)."""

        def sent_all_fenced() -> bool:
            try:
                fences = self.store.last_slots(self.schedule)
            except StoreError:
                return False
            arrived = {(d.entry, d.slot) for d in self.recorder.deliveries()}
            return all((name, slot) in arrived for name, slot in fences.items())

        if not wait_until(sent_all_fenced, timeout, interval=0.02):
            raise AssertionError(
                f"the leader still owes fenced slots after {timeout}s\n{self.diagnostics()}"
            )

    def quiet_broker(self, quiet: float = 0.5, timeout: float = 5.0) -> None:
        """Wait until nothing has arrived for ``quiet`` seconds."""

        def idle() -> bool:
            deliveries = self.recorder.deliveries()
            return not deliveries or time.time() - deliveries[-1].received > quiet

        wait_until(idle, timeout, interval=0.05)

    def problems(self, apart: frozenset[str] = frozenset()) -> list[str]:
        """The judgement of every entry but those judged ``apart`` (by the caller)."""
        return [
            *(f"malformed message: {text}" for text in self.recorder.malformed),
            *problems(
                [d for d in self.recorder.deliveries() if d.entry not in apart],
                self.schedule,
                catch_up_all=self.catch_up == "all",
                wipes=self.wipes,
                until=self.stopped_at,
                fences=self.fences,
                ambiguous=self.ambiguous(),
            ),
        ]

    def ambiguous(self) -> frozenset[tuple[str, int]]:
        """The slots the beats logged as perhaps sent, perhaps not (or, backfilled, never)."""
        found = set()
        planned = schedule_for(self.env["HASHBEAT_CHAOS_SCHEDULE"])
        for process in self.processes.started:
            text = process.log.read_text(errors="replace") if process.log.exists() else ""
            for entry, when in [*AMBIGUOUS.findall(text), *BACKFILL_LOST.findall(text)]:
                found.add((entry, to_ms(datetime.fromisoformat(when))))
            for entry, first, last in BACKFILL_UNQUEUED.findall(text):
                schedule = planned[entry]["schedule"]
                start = next_slot(entry, schedule, to_ms(datetime.fromisoformat(first)) - 1)
                end = to_ms(datetime.fromisoformat(last))
                found.update((entry, slot) for slot in _walk(entry, schedule, start, end))
        return frozenset(found)

    def diagnostics(self, lines: int = 25) -> str:
        """The timeline, the recorder's state and the tail of every beat's log."""
        start = self.timeline[0][0] if self.timeline else time.time()
        parts = ["timeline:"]
        parts += [f"  +{at - start:7.3f}s {text}" for at, text in self.timeline]
        parts.append(
            f"recorder: {len(self.recorder.deliveries())} messages, {self.recorder.connects} "
            f"connections, last error {self.recorder.last_error}"
        )
        for process in self.processes.started:
            parts.append(f"--- {process!r}" + (f", last {lines} lines:" if lines else ""))
            if lines:
                parts.append(process.log_tail(lines))
        return "\n".join(parts)
