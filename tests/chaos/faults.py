"""The faults of the matrix (tests/chaos/matrix.py, docs/design.md §17): what production does
to a beat, its broker or its store, each struck once against a running cell."""

from __future__ import annotations

import hashlib
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from celery_hashbeat import hashcron
from celery_hashbeat.store.redis.scripts.sent import CLAIM_SLOTS_SCRIPT
from tests.chaos.app import TASK
from tests.chaos.harness import token_pid
from tests.support.proxy import FaultProxy

if TYPE_CHECKING:
    from tests.chaos.matrix import Cell
    from tests.support.processes import Process

TTL = 3.0
#: Two SIGTERMs must still end a beat cleanly within this (docs/design.md §10 says a second).
STOP_BOUND = 3.0
#: What a backfill's claim of slots sends the store (EVALSHA of its script, loaded by then).
CLAIM_SLOTS_SHA = hashlib.sha1(CLAIM_SLOTS_SCRIPT.encode()).hexdigest().encode()


def _leader(cell: Cell) -> Process:
    return cell.cluster.steady()


def sigkill(cell: Cell) -> None:
    """The leader killed between ticks (a kill mid-claim loses its slots by design, §10)."""
    leader = _leader(cell)
    cell.cluster.quiet_moment()
    leader.kill()
    cell.cluster.note(f"SIGKILL {leader.name}")
    cell.cluster.gone(leader)
    time.sleep(TTL + 1.5)


def sigstop(cell: Cell) -> None:
    """The leader frozen past its lease, then thawed."""
    leader = _leader(cell)
    cell.cluster.quiet_moment()
    leader.pause()
    cell.cluster.note(f"SIGSTOP {leader.name}")
    time.sleep(TTL + 1.5)
    leader.resume()
    cell.cluster.note(f"SIGCONT {leader.name}")


def sigterm_twice(cell: Cell) -> None:
    """Two SIGTERMs back to back: a clean exit that still gives the lease up."""
    leader = _leader(cell)
    leader.send(signal.SIGTERM)
    leader.send(signal.SIGTERM)
    code = leader.wait(STOP_BOUND + 3)
    cell.cluster.note(f"two SIGTERMs: {leader.name} exited {code}")
    assert code == 0, f"{leader.name} exited {code} after two SIGTERMs"
    holder = cell.cluster.leader_token()
    assert holder is None or token_pid(holder) != leader.pid, "two SIGTERMs kept the lease"
    cell.cluster.gone(leader)
    time.sleep(2)


def _outage(proxy: FaultProxy | None, strike: Callable[[FaultProxy], None], seconds: float) -> None:
    assert proxy is not None
    strike(proxy)
    time.sleep(seconds)
    proxy.pass_through()


def broker_refuse(cell: Cell) -> None:
    _outage(cell.broker_proxy, FaultProxy.refuse, 3)


def broker_hang(cell: Cell) -> None:
    """Past the publish bound (max(TTL, 5 s)), so a hung publish is left behind."""
    _outage(cell.broker_proxy, FaultProxy.hang, 6)


def broker_channel_error(cell: Cell) -> None:
    """An entry whose messages the broker refuses (an exchange it does not have) for a while."""
    with cell.admin() as admin:
        admin.add(
            "bad-exchange",
            TASK,
            hashcron("*/1 * * * * *"),
            options={"exchange": "no-such-exchange", "routing_key": "nowhere"},
            allow_unregistered_task=True,
        )
        time.sleep(4)
        admin.remove("bad-exchange")


def store_lost_reply(cell: Cell) -> None:
    """Every reply lost for a second; on the backfill path, the replies from a backfill's claim
    on (the store ran the claim; the leader never hears that it did)."""
    proxy = cell.store_proxy
    assert proxy is not None
    if cell.path.backfilled:
        proxy.swallow_reply_to(CLAIM_SLOTS_SHA, 1.0)
        assert proxy.wait_triggered(5), "no backfill claim reached the store within 5 s"
        cell.cluster.note("lost the reply to a backfill's claim")
    else:
        proxy.swallow(1.0)
    time.sleep(3)


def store_hang(cell: Cell) -> None:
    _outage(cell.store_proxy, FaultProxy.hang, TTL + 1)


def replica_down(cell: Cell) -> None:
    cell.replica.pause()
    time.sleep(3)
    cell.replica.resume()


def clock_step(cell: Cell) -> None:
    """Every beat's wall clock steps back 10 s for 3 s, forward 5 s for 1 s, then is right."""
    for offset, hold in (("-10", 3.0), ("5", 1.0), ("0", 0.0)):
        cell.clock_file.write_text(offset)
        for beat in cell.cluster.beats:
            beat.send(signal.SIGUSR2)
        cell.cluster.note(f"clock offset {offset} s")
        time.sleep(hold)


FAULTS: dict[str, Callable[[Cell], None]] = {
    "sigkill": sigkill,
    "sigstop": sigstop,
    "sigterm-twice": sigterm_twice,
    "broker-refuse": broker_refuse,
    "broker-hang": broker_hang,
    "broker-channel-error": broker_channel_error,
    "store-lost-reply": store_lost_reply,
    "store-hang": store_hang,
    "replica-down": replica_down,
    "clock-step": clock_step,
}
