"""The fault x path matrix (docs/design.md §17): every fault against every path, one judge.

A *path* is a way a slot travels from the leader to the broker (the Redis batch, the AMQP batch with
and without publisher confirms, the per-message fallback, a hooked ``apply_entry``, messages made
ahead for a burst, run leases, per-worker copies, operators' triggers and backfills, stored
definitions). A *fault* is something production does to a beat, its broker or its store (SIGKILL,
SIGSTOP past the lease, two SIGTERMs, a broker that refuses, hangs or closes the channel, a store
that loses a reply, hangs or loses its replica, a clock step: tests/chaos/faults.py). A *cell* runs
two real ``celery beat`` processes on one path, strikes with one fault, lets the beats heal, and
hands the record to the harness's judge: every (entry, slot) at most once, and
(``catch_up="all"``) at least once except what a beat logged as "may or may not have reached the
broker"; every trigger at most once, and at least once unless logged lost; every backfilled slot
at most once, and at least once unless logged perhaps lost."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path as FilePath
from typing import Any

from celery import Celery
from celery.utils.nodenames import worker_direct

from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.entries.fanout import sub_name
from tests.chaos.app import BACKFILLED, FANNED_NODES, TASK, chaos_schedule, schedule_for
from tests.chaos.faults import FAULTS, TTL
from tests.chaos.harness import Cluster, backfill_problems
from tests.support.proxy import FaultProxy
from tests.support.rabbitmq import private_vhost, unavailable
from tests.support.redis_server import RedisProcess
from tests.support.redis_topologies import Topology, in_sync, wait_for

#: A trigger a beat logged as perhaps lost.
TRIGGER_LOST = "may not have gone out"


@dataclass(frozen=True)
class Path:
    """How the slots travel: the broker, the chaos app's schedule and settings."""

    name: str
    amqp: bool = False
    schedule: str = "chaos"
    env: Mapping[str, str] = field(default_factory=dict)
    #: The entries are stored definitions (ScheduleAdmin.add), beat_schedule is empty.
    stored: bool = False
    #: An operator triggers an entry twice a second while the fault lasts.
    triggered: bool = False
    #: An operator backfills the last two seconds of a paused entry (BACKFILLED, whose slots
    #: only backfills send) and of a running one twice a second while the fault lasts.
    backfilled: bool = False

    def expected(self) -> dict[str, dict[str, Any]]:
        """The entries the judge expects, by the names their messages carry."""
        if self.stored:
            return chaos_schedule()
        planned = schedule_for(self.schedule)
        expected: dict[str, dict[str, Any]] = {}
        for name, spec in planned.items():
            for node in spec.get("workers", ()):
                expected[sub_name(name, node)] = spec
            if "workers" not in spec:
                expected[name] = spec
        expected.pop(BACKFILLED, None)  # judged on its own (Cell.problems)
        return expected


PATHS: tuple[Path, ...] = (
    Path("redis-batch"),
    Path("amqp-batch", amqp=True),
    Path("amqp-confirms", amqp=True, env={"HASHBEAT_CHAOS_CONFIRMS": "1"}),
    Path("per-message", schedule="per-message"),
    Path("hooked", env={"HASHBEAT_CHAOS_HOOKED": "1"}),
    Path("made-ahead", schedule="wave:300"),
    Path("overlap", schedule="overlap"),
    Path("fan-out", schedule="fan-out"),
    Path("trigger", triggered=True),
    Path("stored", schedule="stored", stored=True),
    Path("backfill", schedule="backfill", backfilled=True),
)


@dataclass
class Cell:
    """One path under one fault: the servers, proxies and beats it runs."""

    path: Path
    fault: str
    redis: RedisProcess
    make_cluster: Callable[..., Cluster]
    stack: contextlib.ExitStack
    workdir: FilePath
    broker_url: str = ""
    store_url: str = ""
    broker_proxy: FaultProxy | None = None
    store_proxy: FaultProxy | None = None
    replica: Any = None
    chaos: Cluster | None = None
    triggers_asked: list[str] = field(default_factory=list)
    #: The slots of every backfill of BACKFILLED asked, and how many backfills were asked.
    backfills_asked: set[int] = field(default_factory=set)
    backfills: int = 0
    #: The operator's calls that raised (the first few), to tell a cell that asked nothing why.
    refused: list[str] = field(default_factory=list)

    @property
    def cluster(self) -> Cluster:
        assert self.chaos is not None
        return self.chaos

    def start(self) -> Cluster:
        """The servers the fault needs, then two beats, until one leads steadily."""
        path, fault = self.path, self.fault
        self.broker_url = self.redis.url
        broker_port = self.redis.port
        if path.amqp:
            self.broker_url = self.stack.enter_context(private_vhost())
            broker_port = 5672
        store_url = self.store_url = self.redis.url
        if fault == "replica-down":
            store_url = self.store_url = self._replicated_store()
        env = {**path.env, "HASHBEAT_CHAOS_CLOCK_FILE": str(self.clock_file)}
        if fault.startswith("broker-") and fault != "broker-channel-error":
            self.broker_proxy = self.stack.enter_context(FaultProxy(broker_port))
            env["HASHBEAT_CHAOS_BROKER"] = self._through(self.broker_proxy)
        if fault in ("store-lost-reply", "store-hang"):
            self.store_proxy = self.stack.enter_context(FaultProxy(self.redis.port))
            env["HASHBEAT_CHAOS_STORE"] = self.store_proxy.url("socket_timeout=0.5")
        if path.stored:
            with self.admin() as admin:
                for name, spec in chaos_schedule().items():
                    admin.add(name, TASK, spec["schedule"], allow_unregistered_task=True)
        if path.backfilled:
            with self.admin() as admin:
                admin.pause(BACKFILLED, reason="only backfills send it")
        chaos = self.make_cluster(
            broker_url=self.broker_url,
            store_url=store_url,
            prefix=self.prefix,
            queue="matrix",
            ttl=TTL,
            catch_up="all",
            schedule=path.schedule,
            env=env,
            also=[worker_direct(node) for node in FANNED_NODES],
        )
        chaos.schedule = path.expected()
        self.chaos = chaos.start(beats=2)
        return self.chaos

    @property
    def clock_file(self) -> FilePath:
        return self.workdir / "clock-offset"

    @property
    def prefix(self) -> str:
        return f"matrix-{self.path.name}"

    @contextlib.contextmanager
    def admin(self) -> Iterator[ScheduleAdmin]:
        """An operator's ScheduleAdmin on the cell's store, as the chaos app is configured (its
        beat_schedule too: the admin refuses entries it does not know)."""
        app = Celery("matrix-operator", broker=self.broker_url)
        app.conf.update(
            beat_schedule=schedule_for(self.path.schedule),
            hashbeat_store_url=self.store_url,
            hashbeat_key_prefix=self.prefix,
            task_default_queue="matrix",
            task_default_exchange="matrix",
            task_default_routing_key="matrix",
        )
        admin = ScheduleAdmin(app)
        try:
            yield admin
        finally:
            admin.close()

    def _through(self, proxy: FaultProxy) -> str:
        """The broker URL, with the proxy's port."""
        if self.path.amqp:
            vhost = self.broker_url.rpartition("/")[2]
            return f"amqp://guest:guest@127.0.0.1:{proxy.port}/{vhost}"
        return proxy.url()

    def _replicated_store(self) -> str:
        """A master with one replica; claims wait for it (min_replicas=1)."""
        topology = Topology()
        self.stack.callback(topology.stop)
        master = topology.server("master")
        self.replica = topology.server("replica", "--replicaof", "127.0.0.1", str(master.port))
        wait_for(lambda: in_sync(master, self.replica), 10, "the replica in sync")
        return f"redis://127.0.0.1:{master.port}/0?min_replicas=1&min_replicas_timeout=0.3"

    # Judging ---------------------------------------------------------------------------------

    def problems(self) -> list[str]:
        """The harness's judgement, the triggers' and the backfills': none twice, none lost
        unless logged."""
        chaos = self.cluster
        found = chaos.problems(apart=frozenset({BACKFILLED}))
        if self.path.backfilled:
            asked = {BACKFILLED: self.backfills_asked}
            found += backfill_problems(chaos.recorder.deliveries(), asked, chaos.ambiguous())
            if not self.backfills:
                found.append(f"no backfill was asked: the operator's calls raised {self.refused}")
        if self.path.triggered and not self.triggers_asked:
            found.append(f"no trigger was asked: the operator's calls raised {self.refused}")
        delivered = [task_id for _, task_id in chaos.recorder.triggered]
        twice = sorted({t for t in delivered if delivered.count(t) > 1})
        found += [f"trigger {task_id} enqueued twice" for task_id in twice]
        logged = "".join(
            p.log.read_text(errors="replace") for p in chaos.processes.started if p.log.exists()
        )
        lost = {line for line in logged.splitlines() if TRIGGER_LOST in line}
        found += [
            f"trigger {task_id} asked and never enqueued, nor logged as perhaps lost"
            for task_id in self.triggers_asked
            if task_id not in delivered and not any(task_id in line for line in lost)
        ]
        return found


def trigger(cell: Cell, admin: ScheduleAdmin) -> None:
    cell.triggers_asked.append(admin.trigger("every-second"))


def backfill(cell: Cell, admin: ScheduleAdmin) -> None:
    """Backfill the last two seconds of the paused entry, then of a running one (whose slots
    the leader sends too, or is about to)."""
    for name in (BACKFILLED, "every-second"):
        now = datetime.now(timezone.utc)
        done = admin.backfill(name, now - timedelta(seconds=2), now)
        cell.backfills += 1
        if name == BACKFILLED:
            cell.backfills_asked.update(done.slots)


@contextlib.contextmanager
def operating(cell: Cell, every_s: float = 0.5) -> Iterator[None]:
    """While the body runs, an operator triggers or backfills every ``every_s`` through the
    store, as the cell's path says."""
    act = trigger if cell.path.triggered else backfill if cell.path.backfilled else None
    if act is None:
        yield
        return
    stop = threading.Event()
    with cell.admin() as admin:

        def ask() -> None:
            while not stop.wait(every_s):
                try:
                    act(cell, admin)
                except Exception as exc:  # kept for the judge to show
                    if len(cell.refused) < 3:
                        cell.refused.append(repr(exc))

        thread = threading.Thread(target=ask, name="matrix-operator", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(10)


def applies(path: Path, fault: str) -> str | None:
    """Why ``fault`` does not apply to ``path`` (None when it does)."""
    if fault == "broker-channel-error" and not path.amqp:
        return "only AMQP has channels a broker closes"
    if path.amqp and (reason := unavailable()):
        return reason
    return None


def cells() -> list[tuple[Path, str]]:
    return [(path, fault) for path in PATHS for fault in FAULTS if applies(path, fault) is None]


def diagonal() -> set[tuple[str, str]]:
    """The cells run by default: every path once and every fault at least once, each path given
    a fault no other path took where one applies (the rest run under ``-m matrix``)."""
    unused = list(FAULTS)
    chosen: set[tuple[str, str]] = set()
    for path in PATHS:
        fitting = [f for f in [*unused, *FAULTS] if applies(path, f) is None]
        if fitting:
            chosen.add((path.name, fitting[0]))
            if fitting[0] in unused:
                unused.remove(fitting[0])
    for fault in unused:
        taker = next((p for p in PATHS if applies(p, fault) is None), None)
        if taker is not None:
            chosen.add((taker.name, fault))
    return chosen


def run(cell: Cell) -> list[str]:
    """Start, strike, heal, stop; the judge's findings."""
    chaos = cell.start()
    chaos.steady(timeout=40)
    with operating(cell):
        FAULTS[cell.fault](cell)
        chaos.steady(timeout=40)
        time.sleep(1)
    time.sleep(1.5)
    assert all(beat.alive for beat in chaos.beats), "a beat exited on its own over a fault"
    survivors = [beat.name for beat in chaos.beats]
    codes = chaos.stop(timeout=10)
    assert codes == dict.fromkeys(survivors, 0), f"beats did not all exit 0 on SIGTERM: {codes}"
    return cell.problems()
