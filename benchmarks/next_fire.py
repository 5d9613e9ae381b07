"""Pre-parsed next-fire cost: celery_hashbeat vs cronsim, croniter and Celery's crontab.

    python benchmarks/next_fire.py [--quick]

Everything is parsed or constructed once, outside the timed loop; the loop times only the call
that produces the next fire time (docs/design.md §7 measures this side by side, in one run). How
each peer is driven:

* celery_hashbeat: ``expr.next(start)`` (and, for reference, ``expr.next_timestamp(ts)``).
* cronsim: its constructor both parses and sets the position, and iterating moves it. We
  construct once, save the position the constructor computed (``sim.dt``) and, in the loop,
  put it back before ``next(sim)``: the cost of one attribute store, no re-parse.
* croniter: constructed once; the loop calls ``set_current(start)`` then ``get_next(datetime)``.
* Celery's crontab: constructed once with an app in the zone and ``nowfun`` fixed at the start;
  the loop calls ``remaining_estimate(last_run_at=start)`` (what beat calls, which runs
  ``remaining_delta`` and the ffwd arithmetic); the next fire is start + that estimate.

Before timing, every peer's answer is checked against ours; a peer that disagrees gets a mark
and its answer is listed under the table (Celery's crontab has no DST rule and ANDs the day
fields; croniter has its own DST reading). Times are medians of several repeats, since a
small shared box is noisy. This is a report, never a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import timeit
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from celery import Celery
from celery.schedules import crontab
from croniter import croniter
from cronsim import CronSim

from celery_hashbeat.expr import parse

EXPRESSIONS = [
    "* * * * *",
    "*/15 * * * *",
    "0 0 * * *",
    "30 2 * * *",
    "0 9-17/2 * * 1-5",
    "0 0 29 2 *",
    "0 0 1,15 * 1",
    "59 23 31 12 *",
]
ZONES = ["UTC", "America/New_York"]
START_WALL = datetime(2026, 3, 7, 12, 34, 56)
PEERS = ["cronsim", "croniter", "celery"]


@dataclass
class Case:
    """One (expression, zone) with a prepared callable per library and each answer."""

    text: str
    zone: str
    calls: dict[str, Callable[[], Any]] = field(default_factory=dict)
    answers: dict[str, float] = field(default_factory=dict)
    micros: dict[str, float] = field(default_factory=dict)


def per_call_micros(fn: Callable[[], Any], repeat: int, target: float) -> float:
    """Median over ``repeat`` runs of the per-call time, each run lasting about ``target`` s."""
    number = 1
    while True:
        elapsed = timeit.Timer(fn).timeit(number)
        if elapsed >= target / 5:
            break
        number *= 2
    number = max(1, int(number * target / max(elapsed, 1e-9)))
    runs = timeit.Timer(fn).repeat(repeat=repeat, number=number)
    return statistics.median(runs) / number * 1e6


def prepare(text: str, zone_name: str) -> Case:
    """Parse/construct once per library; return the timed callables and their answers."""
    zone = ZoneInfo(zone_name)
    start = START_WALL.replace(tzinfo=zone)
    start_ts = start.timestamp()
    case = Case(text, zone_name)

    ours = parse(text, tz=zone_name)
    case.calls["ours"] = lambda: ours.next(start)
    case.calls["ours_ts"] = lambda: ours.next_timestamp(start_ts)
    case.answers["ours"] = ours.next(start).timestamp()

    sim = CronSim(text, start)
    position = sim.dt

    def cronsim_next() -> datetime:
        sim.dt = position
        return next(sim)

    case.calls["cronsim"] = cronsim_next
    case.answers["cronsim"] = cronsim_next().timestamp()

    it = croniter(text, start)

    def croniter_next() -> datetime:
        it.set_current(start, force=True)
        return it.get_next(datetime)  # type: ignore[no-any-return]

    case.calls["croniter"] = croniter_next
    case.answers["croniter"] = croniter_next().timestamp()

    app = Celery(set_as_current=False)
    app.conf.timezone = zone_name
    app.conf.enable_utc = True
    minute, hour, dom, month, dow = text.split()
    cron = crontab(
        minute=minute,
        hour=hour,
        day_of_month=dom,
        month_of_year=month,
        day_of_week=dow,
        nowfun=lambda: start,
        app=app,
    )
    case.calls["celery"] = lambda: cron.remaining_estimate(start)
    estimate: timedelta = cron.remaining_estimate(start)
    case.answers["celery"] = (start.astimezone(timezone.utc) + estimate).timestamp()
    return case


def parse_costs(repeat: int, target: float) -> dict[str, float]:
    """µs per parse/construct, averaged over every benchmark expression in both zones."""
    combos = [(t, z, START_WALL.replace(tzinfo=ZoneInfo(z))) for t in EXPRESSIONS for z in ZONES]
    apps = {}
    for z in ZONES:
        app = Celery(set_as_current=False)
        app.conf.timezone = z
        apps[z] = app
    fresh = itertools.count()

    def ours_cached() -> None:
        for t, z, _ in combos:
            parse(t, tz=z)

    def ours_fresh() -> None:
        for t, z, _ in combos:
            parse(t, next(fresh), tz=z)  # a new key each time: misses parse()'s cache

    def cronsim_parse() -> None:
        for t, _, s in combos:
            CronSim(t, s)

    def croniter_parse() -> None:
        for t, _, s in combos:
            croniter(t, s)

    def celery_parse() -> None:
        for t, z, _ in combos:
            m, h, dom, mon, dow = t.split()
            crontab(m, h, dow, dom, mon, app=apps[z])

    n = len(combos)
    return {
        "ours (same text again: cached)": per_call_micros(ours_cached, repeat, target) / n,
        "ours (new key each call: parse cache missed)": per_call_micros(ours_fresh, repeat, target)
        / n,
        "cronsim": per_call_micros(cronsim_parse, repeat, target) / n,
        "croniter": per_call_micros(croniter_parse, repeat, target) / n,
        "celery crontab": per_call_micros(celery_parse, repeat, target) / n,
    }


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    args = parser.parse_args()
    repeat, target = (3, 0.01) if args.quick else (7, 0.03)

    print(f"next fire after {START_WALL.isoformat(sep=' ')} (wall time in each zone)")
    print(f"median of {repeat} repeats of ~{target * 1000:.0f} ms each; µs per call")
    print(
        "cronsim: constructed once, position restored before each next(); croniter: "
        "set_current() + get_next(); celery: remaining_estimate(last_run_at) with nowfun fixed"
    )
    print()
    cases = [prepare(t, z) for z in ZONES for t in EXPRESSIONS]
    disagreements: list[str] = []
    for case in cases:
        for name in PEERS:
            if case.answers[name] != case.answers["ours"]:
                zone = ZoneInfo(case.zone)
                theirs = datetime.fromtimestamp(case.answers[name], zone).isoformat()
                mine = datetime.fromtimestamp(case.answers["ours"], zone).isoformat()
                disagreements.append(
                    f"  {name:<8} {case.text!r:<20} {case.zone:<17} {theirs}  (ours {mine})"
                )
        for name, fn in case.calls.items():
            case.micros[name] = per_call_micros(fn, repeat, target)

    header = (
        f"{'expression':<18} {'zone':<17} {'ours':>7} {'ours_ts':>8} {'cronsim':>9} "
        f"{'croniter':>9} {'celery':>9} {'cronsim/ours':>12} {'croniter/ours':>13} "
        f"{'celery/ours':>11}"
    )
    print(header)
    print("-" * len(header))
    ratios: dict[str, list[float]] = {name: [] for name in PEERS}
    for case in cases:
        cells = []
        for name in PEERS:
            mark = "≠" if case.answers[name] != case.answers["ours"] else " "
            cells.append(f"{case.micros[name]:>8.2f}{mark}")
            ratios[name].append(case.micros[name] / case.micros["ours"])
        print(
            f"{case.text:<18} {case.zone:<17} {case.micros['ours']:>7.2f} "
            f"{case.micros['ours_ts']:>8.2f} {cells[0]} {cells[1]} {cells[2]} "
            f"{ratios['cronsim'][-1]:>11.1f}x {ratios['croniter'][-1]:>12.1f}x "
            f"{ratios['celery'][-1]:>10.1f}x"
        )
    print("-" * len(header))
    means = {name: geometric_mean(values) for name, values in ratios.items()}
    ours_mean = geometric_mean([c.micros["ours"] for c in cases])
    print(
        f"{'geometric mean':<36} {ours_mean:>7.2f} "
        f"{geometric_mean([c.micros['ours_ts'] for c in cases]):>8.2f} "
        f"{geometric_mean([c.micros['cronsim'] for c in cases]):>8.2f}  "
        f"{geometric_mean([c.micros['croniter'] for c in cases]):>8.2f}  "
        f"{geometric_mean([c.micros['celery'] for c in cases]):>8.2f}  "
        f"{means['cronsim']:>11.1f}x {means['croniter']:>12.1f}x {means['celery']:>10.1f}x"
    )
    print()
    bar = all(means[name] >= 5 for name in ("cronsim", "celery"))
    print(
        f"docs/design.md §7 bar (>= 5x cronsim and celery, geometric mean): "
        f"cronsim {means['cronsim']:.1f}x, celery {means['celery']:.1f}x -> "
        f"{'met' if bar else 'NOT met'}"
    )
    print()
    if disagreements:
        print("≠ peers whose next fire differs from ours (their answer, then ours):")
        print("\n".join(disagreements))
    else:
        print("every peer agrees with ours on every case")
    print()
    print("parse / construct cost, µs per expression (the 8 expressions x 2 zones):")
    for name, micros in parse_costs(repeat, target).items():
        print(f"  {name:<46} {micros:>8.2f}")


if __name__ == "__main__":
    main()
