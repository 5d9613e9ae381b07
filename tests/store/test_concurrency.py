"""Contenders racing for the lease and the fence: threads, and real processes on one store."""

from __future__ import annotations

import multiprocessing
import queue
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from itertools import product

from ._contenders import elect, elect_then_race, race
from .conftest import Backend

CONTENDERS = 4
ENTRIES = ("e0", "e1", "e2", "e3")
ROUNDS = 50  # 4 entries x 50 rounds: 200 slots to claim, each exactly once


def assert_each_slot_claimed_once(claims: list[tuple[str, int]]) -> None:
    counts = Counter(claims)
    doubled = {claim: n for claim, n in counts.items() if n > 1}
    assert not doubled, f"slots claimed more than once: {doubled}"
    assert set(counts) == set(product(ENTRIES, range(1, ROUNDS + 1)))


def test_threads_elect_exactly_one_leader(backend: Backend) -> None:
    for attempt in range(5):
        barrier = threading.Barrier(8)
        prefix = f"{backend.prefix}-{attempt}"
        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(elect, backend.url, prefix, f"t{i}", barrier) for i in range(8)]
            won = [future.result(timeout=60) for future in futures]
        assert won.count(True) == 1, won


def test_threads_never_claim_a_slot_twice(backend: Backend) -> None:
    barrier = threading.Barrier(CONTENDERS)
    with ThreadPoolExecutor(CONTENDERS) as pool:
        futures = [
            pool.submit(race, backend.url, backend.prefix, f"t{i}", barrier, ENTRIES, ROUNDS)
            for i in range(CONTENDERS)
        ]
        claims = [claim for future in futures for claim in future.result(timeout=60)]
    assert_each_slot_claimed_once(claims)


def test_processes_elect_one_leader_and_never_claim_a_slot_twice(backend: Backend) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(CONTENDERS)
    results: multiprocessing.Queue[tuple[str, bool, list[tuple[str, int]]]] = context.Queue()
    processes = [
        context.Process(
            target=elect_then_race,
            args=(backend.url, backend.prefix, f"p{i}", barrier, results, ENTRIES, ROUNDS),
        )
        for i in range(CONTENDERS)
    ]
    for process in processes:
        process.start()
    try:
        outcomes = [results.get(timeout=60) for _ in processes]
    except queue.Empty:
        outcomes = []
    finally:
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    assert [process.exitcode for process in processes] == [0] * CONTENDERS
    assert len(outcomes) == CONTENDERS
    assert [won for _, won, _ in outcomes].count(True) == 1
    assert_each_slot_claimed_once([claim for _, _, claims in outcomes for claim in claims])
