"""§3's promise to users: a thousand `H` entries spread evenly, fields draw independently, and
`H H * * *` can land on every minute of the day.

Chi-square tests at the 99% level. scipy is not a dependency, so the critical values come from
``chi2_quantile`` below (regularized incomplete gamma, series and continued fraction, then
bisection); ``test_chi2_quantile_matches_published_tables`` checks it against the 0.99 column of
the NIST/SEMATECH e-Handbook of Statistical Methods, table 1.3.6.7.4.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest

from celery_hashbeat.expr import parse

N_KEYS = 10_000
FIELDS = ("second", "minute", "hour", "day_of_month", "month", "day_of_week")
# The values a bare H may take in each field (§2: day-of-month 1-28, day-of-week 0-6).
H_RANGE = {
    "second": range(60),
    "minute": range(60),
    "hour": range(24),
    "day_of_month": range(1, 29),
    "month": range(1, 13),
    "day_of_week": range(7),
}


def _lower_gamma_regularized(a: float, x: float) -> float:
    """P(a, x): series for x < a + 1, Lentz continued fraction for the upper tail otherwise."""
    if x <= 0:
        return 0.0
    log_prefix = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-15:
            n += 1
            term *= x / n
            total += term
        return total * math.exp(log_prefix)
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in itertools.count(1):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return 1 - math.exp(log_prefix) * h


def chi2_quantile(p: float, df: int) -> float:
    """The x with CDF_chi2(x; df) = p, by bisection on P(df/2, x/2)."""
    lo, hi = 0.0, df + 20 * math.sqrt(2 * df) + 50
    for _ in range(200):
        mid = (lo + hi) / 2
        if _lower_gamma_regularized(df / 2, mid / 2) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@pytest.mark.parametrize(
    ("df", "published"),
    [
        (1, 6.635),
        (6, 16.812),
        (9, 21.666),
        (11, 24.725),
        (23, 41.638),
        (27, 46.963),
        (100, 135.807),
    ],
)
def test_chi2_quantile_matches_published_tables(df: int, published: float) -> None:
    """The critical values this file uses are right (NIST table, 0.99 column)."""
    assert chi2_quantile(0.99, df) == pytest.approx(published, abs=0.0015)


def chi2_statistic(counts: list[int]) -> float:
    expected = sum(counts) / len(counts)
    return sum((c - expected) ** 2 / expected for c in counts)


@pytest.fixture(scope="module")
def draws() -> dict[str, list[int]]:
    """Every field's H value for N_KEYS keys, read back from str(expr)."""
    values: dict[str, list[int]] = {name: [] for name in FIELDS}
    for i in range(N_KEYS):
        resolved = str(parse("H H H H H H", f"tasks.refresh-{i}")).split()
        for name, text in zip(FIELDS, resolved, strict=True):
            values[name].append(int(text))
    return values


@pytest.mark.parametrize("name", FIELDS)
def test_each_field_is_uniform(draws: dict[str, list[int]], name: str) -> None:
    """Chi-square goodness of fit to the uniform distribution over the field's H range."""
    seen = Counter(draws[name])
    assert set(seen) <= set(H_RANGE[name]), sorted(set(seen) - set(H_RANGE[name]))
    counts = [seen[v] for v in H_RANGE[name]]
    statistic = chi2_statistic(counts)
    critical = chi2_quantile(0.99, len(counts) - 1)
    assert statistic < critical, f"{name}: chi2 {statistic:.1f} >= {critical:.1f}, {counts}"


def _quartile(name: str, value: int) -> int:
    span = H_RANGE[name]
    return (value - span.start) * 4 // len(span)


@pytest.mark.parametrize(("a", "b"), list(itertools.combinations(FIELDS, 2)))
def test_fields_are_independent(draws: dict[str, list[int]], a: str, b: str) -> None:
    """Chi-square test of independence on a 4x4 table of the two fields' quarters."""
    table = Counter(
        (_quartile(a, x), _quartile(b, y)) for x, y in zip(draws[a], draws[b], strict=True)
    )
    rows = Counter(_quartile(a, x) for x in draws[a])
    cols = Counter(_quartile(b, y) for y in draws[b])
    statistic = 0.0
    for i, j in itertools.product(range(4), range(4)):
        expected = rows[i] * cols[j] / N_KEYS
        statistic += (table[(i, j)] - expected) ** 2 / expected
    critical = chi2_quantile(0.99, 9)
    assert statistic < critical, f"{a} x {b}: chi2 {statistic:.1f} >= {critical:.1f}"


def test_hashed_steps_start_uniformly() -> None:
    """H/15 picks its start uniformly in 0..14 (§3: start = lo + u % n)."""
    starts = Counter(
        int(str(parse("H/15 * * * *", f"poll-{i}")).split()[0].split(",")[0]) for i in range(3000)
    )
    counts = [starts[s] for s in range(15)]
    assert chi2_statistic(counts) < chi2_quantile(0.99, 14), counts


def test_daily_reaches_every_minute_of_the_day() -> None:
    """`H H * * *` can land on all 1,440 minutes (§3: croniter's reaches 240)."""
    seen: set[tuple[int, int]] = set()
    for i in range(100_000):
        minute, hour = map(int, str(parse("H H * * *", f"nightly-{i}")).split()[:2])
        seen.add((hour, minute))
        if len(seen) == 1440:
            break
    assert len(seen) == 1440, f"only {len(seen)} minutes reached after {i + 1} keys"
    assert all(0 <= h < 24 and 0 <= m < 60 for h, m in seen)
