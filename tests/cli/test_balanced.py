"""``hashbeat spread --balanced`` and ``hashbeat explain`` for balanced entries (docs/design.md
§16), run as real commands. Pure values are computed here from sha256 as docs/design.md §3 defines
them; which keys the balancer moves comes from the engine (tests/expr/test_balance.py checks it)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from celery_hashbeat.expr.balance import assign, terms_of
from celery_hashbeat.store import Store

Run = Callable[..., subprocess.CompletedProcess[str]]
BALANCED = "tests.cli.balanced"
NAMES = [f"report-{n}" for n in range(60)]


def minute(key: str) -> int:
    digest = hashlib.sha256(key.encode() + b"\x1fminute\x1f0").digest()
    return int.from_bytes(digest[:8], "big") % 60


def moved_key() -> tuple[str, int]:
    """A report the balancer moves off its hashed minute, and the minute it gets."""
    assigned = assign(NAMES, terms_of("H * * * *"))
    name = next(name for name in NAMES if assigned[name][0] != minute(name))
    return name, assigned[name][0]


def test_spread_shows_pure_and_balanced_side_by_side(run: Run, tmp_path: Path) -> None:
    (tmp_path / "keys.txt").write_text("\n".join(NAMES) + "\n")
    result = run("hashbeat", "spread", "--expr", "H * * * *", "--keys", "keys.txt",
                 "--balanced", "--date", "2026-06-01", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    pure_peak = max(Counter(minute(name) for name in NAMES).values())
    assert shown["pure"]["peak"] == pure_peak > 2
    assert shown["balanced"]["peak"] <= 2
    assert shown["plain"]["peak"] == 60
    assert {shown[name]["total"] for name in ("pure", "balanced", "plain")} == {60 * 24}


def test_spread_of_a_balancing_app_shows_both(run: Run) -> None:
    result = run("hashbeat", "spread", "-A", BALANCED, "--date", "2026-06-01", "--width", "40")
    assert result.returncode == 0, result.stderr
    peaks = dict(re.findall(r"^hashed, (pure|balanced) .*?: peak (\d+)/minute", result.stdout,
                            re.MULTILINE))  # fmt: skip
    assert int(peaks["pure"]) == max(Counter(minute(name) for name in NAMES).values())
    assert int(peaks["balanced"]) <= 2


def test_explain_says_when_the_balancer_chose_the_value(run: Run) -> None:
    name, balanced = moved_key()
    result = run("hashbeat", "explain", "H * * * *", "--key", name, "-A", BALANCED)
    assert result.returncode == 0, result.stderr
    assert f"resolved     {balanced} * * * *" in result.stdout
    assert (
        f"balanced     yes (as the app's schedule balances it): the hash gives "
        f"{minute(name)} * * * *" in result.stdout
    )
    plain = run("hashbeat", "explain", "H * * * *", "--key", name)
    assert f"resolved     {minute(name)} * * * *" in plain.stdout
    assert "balanced" not in plain.stdout


@pytest.mark.parametrize(
    "document",
    [
        lambda name: {"groups": [{"sizes": [60], "entries": ["report-x", name], "slots": [3, 7]}]},
        lambda name: {name: [7]},  # as leaders before the compact form wrote it
    ],
    ids=["entries-and-slots", "offsets-by-entry"],
)
def test_explain_reads_the_leaders_assignment_from_the_store(
    run: Run, store: Store, document: Callable[[str], object]
) -> None:
    name, _ = moved_key()
    assert store.acquire("host:1:leader", 60_000)
    assert store.share("host:1:leader", "balance", json.dumps(document(name)))
    result = run("hashbeat", "explain", "H * * * *", "--key", name, "-A", BALANCED, "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["resolved"] == "7 * * * *"
    assert shown["balanced"] == {
        "offsets": [7],
        "hashed": f"{minute(name)} * * * *",
        "from": "the leader's assignment in the store",
    }


def test_explain_of_another_shape_is_the_hash_alone(run: Run) -> None:
    name, _ = moved_key()
    result = run("hashbeat", "explain", "H(0-29) * * * *", "--key", name, "-A", BALANCED)
    assert result.returncode == 0, result.stderr
    assert "balanced" not in result.stdout


def test_schedule_shows_the_balanced_values(run: Run) -> None:
    name, balanced = moved_key()
    result = run("hashbeat", "schedule", "-A", BALANCED, "--json", "--no-store")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["entries"]}
    del rows["celery.backend_cleanup"]  # Celery's own entry, a crontab: not balanced
    assert rows[name]["resolved"] == f"{balanced} * * * *"
    assert all(row["balanced"] for row in rows.values())
    peak = max(Counter(row["resolved"] for row in rows.values()).values())
    assert peak <= 2
    text = run("hashbeat", "schedule", "-A", BALANCED, "--no-store")
    assert re.search(rf"^{name}\s+reports.build\s+hashcron, balanced\s", text.stdout, re.MULTILINE)
