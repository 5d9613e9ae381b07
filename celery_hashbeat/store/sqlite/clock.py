"""When a lease, heartbeat or run-lease row of the SQLite store is live.

They expire on the host's monotonic clock, which every process of one boot shares and no clock
step moves (a wall-clock step would otherwise stretch or cut the lease, or hide live beats). That
clock restarts at boot, so each row also records the boot it was written in and the TTL it was
given: it is live only in the same boot and while its expiry is ahead by no more than that TTL.
The boot id alone is exact on Linux; the TTL bound alone is safe where there is no boot id (an
old lease can then look held for at most one TTL after a reboot, and its holder died with that
boot). A boot id guessed from the wall clock would not do: two processes could guess apart and
both take the lease. ``last_seen_ms``, shown to people, stays wall-clock milliseconds.
"""

from __future__ import annotations

import time
from pathlib import Path

#: A row that is live in this boot at the monotonic instant given twice after the boot id.
LIVE = "boot = ? AND expires_ms > ? AND expires_ms - ttl_ms <= ?"


def wall_now_ms() -> int:
    """Wall-clock milliseconds, for people to read."""
    return int(time.time() * 1000)


def lease_now_ms() -> int:
    """Milliseconds on the host-wide monotonic clock that times leases and heartbeats."""
    return int(time.monotonic() * 1000)


def _boot_id() -> str:
    """This boot's identity (Linux); elsewhere "", leaving the TTL bound to spot a reboot."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


BOOT = _boot_id()
