"""Balanced spread against pure hashing (DESIGN.md §16), side by side in one run.

    python benchmarks/balance.py [--quick] [--changes N]

For N entries of one expression (keys ``job-0`` ... ``job-<N-1>``) over minute slots
(``H * * * *``), hour-of-day slots (``0 H * * *``) and second slots (``H * * * * *``), prints:

* peak/mean for pure hashing (DESIGN.md §3) and for the balancer, and the bar,
  ceil(N / slots) + 1, that the balanced peak must stay within;
* how many *other* entries change value when one entry is added or removed (``--changes``
  of each, alternately, at random), as an average and the worst seen;
* the median time to compute the whole assignment.

Moves are measured from one set to the next, so each change starts from the assignment the
previous one left. This is a report, never a test: the property tests check the bounds.
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
    keys: list[str], terms: tuple[Term, ...], changes: int, rng: random.Random
) -> tuple[float, int]:
    """Average and worst number of other keys whose value changes per add or remove."""
    current = assign(keys, terms)
    present = list(keys)
    counted = []
    for change in range(changes):
        if change % 2 == 0:
            present.append(f"new-{change}")
        else:
            present.remove(rng.choice(present))
        after = assign(present, terms)
        counted.append(sum(1 for key, value in after.items() if current.get(key, value) != value))
        current = after
    return statistics.mean(counted), max(counted)


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
    parser.add_argument("--changes", type=int, default=40, help="adds and removes per row")
    args = parser.parse_args()
    changes = 10 if args.quick else args.changes
    repeat = 3 if args.quick else 5
    rng = random.Random(20261123)
    header = (
        f"{'slots':<14}{'N':>7}{'bar':>6}{'pure peak':>11}{'pure p/m':>10}{'bal. peak':>11}"
        f"{'bal. p/m':>10}{'moves avg':>11}{'moves max':>11}{'assign ms':>11}"
    )
    print(f"keys job-0 ... job-<N-1>; {changes} adds/removes per row; median of {repeat} runs")
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
            average, worst = moves(keys, terms, changes, rng)
            took = timed(keys, terms, repeat) * 1000
            label = f"{name} ({slots})"
            print(
                f"{label:<14}{size:>7}{math.ceil(size / slots) + 1:>6}{pure_peak:>11}"
                f"{pure_ratio:>10.2f}{peak:>11}{ratio:>10.2f}{average:>11.2f}{worst:>11}"
                f"{took:>11.1f}"
            )


if __name__ == "__main__":
    main()
