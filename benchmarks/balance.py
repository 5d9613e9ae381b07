"""Balanced spread against pure hashing (docs/design.md §16), side by side in one run.

    python benchmarks/balance.py [--quick] [--changes N]

For N entries of one expression (keys ``job-0`` ... ``job-<N-1>``) over minute slots
(``H * * * *``), hour-of-day slots (``0 H * * *``) and second slots (``H * * * * *``), prints:

* peak/mean for pure hashing (docs/design.md §3) and for the balancer, and the bar,
  ceil(N / slots) + 1, that the balanced peak must stay within;
* how many *other* entries change value when one entry is added or removed: the average over
  adds and removes together, each alone, and the worst seen;
* the median time to compute the whole assignment of N entries.

The changes come in runs: min(N, slots) adds of new keys, then as many removes of keys chosen at
random (old or new), again and again until at least ``--changes`` are done. So the set size
passes every remainder modulo the slot count, up and down, where the capacities of the slots
change: a measurement at one fixed size (alternating one add and one remove) sees a single
remainder and can be far from the average. Moves are counted from one set to the next, so each
change starts from the assignment the previous one left. This is a report, never a test: the
property tests check the bounds.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from celery_hashbeat.expr.balance import Term, assign, seeded, terms_of

SHAPES = {"minute": "H * * * *", "hour": "0 H * * *", "second": "H * * * * *"}
SIZES = (10, 60, 100, 1_000, 10_000)


def peak_over_mean(values: list[tuple[int, ...]], slots: int) -> tuple[int, float]:
    peak = max(Counter(values).values())
    return peak, peak / (len(values) / slots)


def moves(
    keys: list[str], terms: tuple[Term, ...], slots: int, changes: int, rng: random.Random
) -> tuple[list[int], list[int]]:
    """How many other keys change value at each add and at each remove, over at least
    ``changes`` changes in whole runs of adds and removes."""
    run = min(len(keys), slots)
    present = list(keys)
    current = assign(present, terms)
    added: list[int] = []
    removed: list[int] = []
    for change in range(-(-changes // (2 * run)) * 2 * run):
        adding = (change // run) % 2 == 0
        if adding:
            present.append(f"new-{change}")
        else:
            present.remove(rng.choice(present))
        after = assign(present, terms)
        moved = sum(1 for key, value in after.items() if current.get(key, value) != value)
        (added if adding else removed).append(moved)
        current = after
    return added, removed


def timed(keys: list[str], terms: tuple[Term, ...], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        assign(keys, terms)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer changes and repeats")
    parser.add_argument("--changes", type=int, default=240, help="adds and removes per row")
    args = parser.parse_args()
    changes = 1 if args.quick else args.changes  # one run of adds and one of removes
    repeat = 3 if args.quick else 5
    rng = random.Random(20261123)
    header = (
        f"{'slots':<14}{'N':>7}{'bar':>5}{'pure peak':>11}{'pure p/m':>10}{'bal. peak':>11}"
        f"{'bal. p/m':>10}{'moves avg':>11}{'add avg':>9}{'rm avg':>8}{'moves max':>11}"
        f"{'assign ms':>11}"
    )
    print(
        f"keys job-0 ... job-<N-1>; at least {changes} changes per row, in runs of min(N, slots) "
        f"adds, then as many removes; assignment: median of {repeat} runs"
    )
    print(header)
    print("-" * len(header))
    for name, expression in SHAPES.items():
        terms = terms_of(expression)
        slots = math.prod(term.count for term in terms)
        for size in SIZES:
            keys = [f"job-{index}" for index in range(size)]
            pure = [seeded(key, terms) for key in keys]
            balanced = list(assign(keys, terms).values())
            pure_peak, pure_ratio = peak_over_mean(pure, slots)
            peak, ratio = peak_over_mean(balanced, slots)
            added, removed = moves(keys, terms, slots, changes, rng)
            took = timed(keys, terms, repeat) * 1000
            label = f"{name} ({slots})"
            print(
                f"{label:<14}{size:>7}{math.ceil(size / slots) + 1:>5}{pure_peak:>11}"
                f"{pure_ratio:>10.2f}{peak:>11}{ratio:>10.2f}"
                f"{statistics.mean(added + removed):>11.2f}{statistics.mean(added):>9.2f}"
                f"{statistics.mean(removed):>8.2f}{max(added + removed):>11}{took:>11.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
