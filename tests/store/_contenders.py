"""Contenders for the lease and the fence, run as threads or as separate processes.

A module of its own so that processes started with ``spawn`` can import it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

from celery_hashbeat.store import open_store

BARRIER_TIMEOUT = 30.0


class Barrier(Protocol):
    def wait(self, timeout: float | None = None) -> int: ...


class Results(Protocol):
    def put(self, item: object) -> None: ...


def elect(url: str, prefix: str, name: str, barrier: Barrier) -> bool:
    """Everyone asks for the lease at once; the answer says whether this contender got it."""
    store = open_store(url, prefix)
    try:
        barrier.wait(BARRIER_TIMEOUT)
        return store.acquire(name, 60_000)
    finally:
        store.close()


def race(
    url: str, prefix: str, name: str, barrier: Barrier, entries: Sequence[str], rounds: int
) -> list[tuple[str, int]]:
    """Claims slots 1..rounds of every entry, as fast as it can, whether it leads or not.

    The lease is short and given up at random, so leadership keeps moving; every contender
    calls claim every time, so the store alone must keep non-holders out. Returns what this
    contender claimed.
    """
    store = open_store(url, prefix)
    rng = random.Random(name)
    claimed: list[tuple[str, int]] = []
    try:
        barrier.wait(BARRIER_TIMEOUT)
        for slot in range(1, rounds + 1):
            while min(store.last_slots(entries).get(entry, 0) for entry in entries) < slot:
                store.acquire(name, 50)
                won = store.claim(name, dict.fromkeys(entries, (slot, "fp")))
                claimed += [(entry, slot) for entry in won]
                if rng.random() < 0.5:
                    store.release(name)
    finally:
        store.close()
    return claimed


def elect_then_race(
    url: str,
    prefix: str,
    name: str,
    barrier: Barrier,
    results: Results,
    entries: Sequence[str],
    rounds: int,
) -> None:
    """Both contests in one process, so the slow start of a process is paid once."""
    won = elect(url, f"{prefix}-elect", name, barrier)
    results.put((name, won, race(url, prefix, name, barrier, entries, rounds)))
