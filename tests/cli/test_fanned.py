"""``hashbeat schedule``, ``status``, ``explain`` and ``spread`` for entries that run on workers
(docs/design.md §11) or guard their runs (§12), run as real commands against the app
tests.cli.fanned, with the roster and the run leases written into the test's store.

Expected hash values are computed here from sha256 as docs/design.md §3 defines them, never by the
code under test.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from celery_hashbeat.cli.output import Exit
from celery_hashbeat.store import Store
from celery_hashbeat.store.values import RunGuard

Run = Callable[..., subprocess.CompletedProcess[str]]
FANNED = "tests.cli.fanned"
TOKEN = "host:1:leader"
WEB = ["celery@web-1", "celery@web-2"]


def seeded(key: str, field: str) -> int:
    """docs/design.md §3's ``u`` for the first hash term of ``field`` seeded by ``key``."""
    digest = hashlib.sha256(key.encode() + b"\x1f" + field.encode() + b"\x1f0").digest()
    return int.from_bytes(digest[:8], "big")


def minute(key: str) -> int:
    """What ``H`` in the minute field resolves to for ``key``."""
    return seeded(key, "minute") % 60


def schedule_rows(run: Run, *args: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    done = run("hashbeat", "schedule", "-A", FANNED, "--json", *args)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    return shown, {row["name"]: row for row in shown["entries"]}


def line_of(output: str, name: str) -> list[str]:
    """The cells of the table row of entry ``name`` (cells are two or more spaces apart)."""
    [line] = [line for line in output.splitlines() if line.startswith(f"{name} ")]
    return re.split(r"\s{2,}", line)


def test_schedule_without_the_store(run: Run) -> None:
    """Listed workers need no store: their copies are listed, each keyed by its own name; the
    "*" entry is one row saying its workers are not known, and that is not an error."""
    done = run("hashbeat", "schedule", "-A", FANNED, "--no-store")
    assert done.returncode == 0, done.stdout + done.stderr
    for node in WEB:
        name = f"rotate-logs@{node}"
        offset = seeded(name, "interval") % 3_600_000
        cells = line_of(done.stdout, name)
        assert cells[4:6] == [f"every 1h00m, {offset / 1000:.3f}s into each period", name]
    assert "rotate-logs " not in done.stdout  # the copies stand for it
    assert line_of(done.stdout, "refresh")[-1] == "workers not known yet"
    assert "no copies: entry 'refresh' runs on every live worker" in done.stdout
    assert "without --no-store" in done.stdout
    assert "cannot run" not in done.stdout and done.stderr == ""

    shown, rows = schedule_rows(run, "--no-store")
    assert shown["workers"] is None
    assert set(rows) == {
        "import-orders", "refresh", "celery.backend_cleanup",
        *(f"rotate-logs@{node}" for node in WEB),
    }  # fmt: skip
    for node in WEB:
        row = rows[f"rotate-logs@{node}"]
        assert (row["parent"], row["worker"], row["key"]) == ("rotate-logs", node, row["name"])
        assert row["overlap"] == "allow"
    assert rows["import-orders"]["overlap"] == "skip"
    assert rows["import-orders"]["parent"] is None and rows["import-orders"]["worker"] is None
    refresh = rows["refresh"]
    assert refresh["error"] is None and refresh["next_ms"] is None
    assert "--no-store" in refresh["idle"]
    assert (refresh["task"], refresh["kind"], refresh["key"]) == ("fanned.refresh", "hashcron", "-")


def test_schedule_waits_for_the_census(run: Run, store: Store) -> None:
    """The store answers but no leader took a census yet."""
    store.ping()
    done = run("hashbeat", "schedule", "-A", FANNED)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "waiting for the leader's census of live workers" in done.stdout
    assert line_of(done.stdout, "refresh")[-2:] == ["workers not known yet", "-"]
    _, rows = schedule_rows(run)
    assert "waiting for the leader's census" in rows["refresh"]["idle"]


def test_schedule_fans_every_worker_out_to_the_roster(run: Run, store: Store) -> None:
    resolved = int(time.time() * 1000) - 5_000
    assert store.acquire(TOKEN, 30_000)
    assert store.set_roster(TOKEN, ["celery@web-1", "celery@web-3"], resolved)
    shown, rows = schedule_rows(run)
    assert shown["workers"] == {"nodes": ["celery@web-1", "celery@web-3"], "resolved_ms": resolved}
    assert "refresh" not in rows
    assert {name for name in rows if name.startswith("refresh")} == {
        "refresh@celery@web-1",
        "refresh@celery@web-3",
    }
    for node in ("celery@web-1", "celery@web-3"):
        name = f"refresh@{node}"
        row = rows[name]
        assert (row["parent"], row["worker"], row["key"], row["idle"]) == (
            "refresh",
            node,
            name,
            None,
        )
        assert row["resolved"] == f"{minute(name)} * * * *"
        assert row["next_ms"] % 3_600_000 == minute(name) * 60_000
    done = run("hashbeat", "schedule", "-A", FANNED)
    assert done.returncode == 0, done.stderr
    name = "refresh@celery@web-3"
    assert line_of(done.stdout, name)[4:6] == [f"{minute(name)} * * * *", name]  # RESOLVED, KEY
    assert "no copies" not in done.stdout


def test_schedule_with_no_live_worker(run: Run, store: Store) -> None:
    assert store.acquire(TOKEN, 30_000)
    assert store.set_roster(TOKEN, [], int(time.time() * 1000))
    done = run("hashbeat", "schedule", "-A", FANNED)
    assert done.returncode == 0, done.stderr
    assert line_of(done.stdout, "refresh")[-2:] == ["no live workers", "-"]
    assert "no worker answered the leader's census at" in done.stdout


def test_status_shows_the_roster_and_the_run_leases(run: Run, store: Store) -> None:
    done = run("hashbeat", "status", "-A", FANNED)
    assert done.returncode == 0, done.stderr
    heads = [line.split()[0] for line in done.stdout.splitlines()]
    assert heads[:5] == ["store", "leader", "beats", "enqueued", "entries"]  # no roster, no runs
    assert heads[5] == "ENTRY"
    shown = json.loads(run("hashbeat", "status", "-A", FANNED, "--json").stdout)
    assert (shown["workers"], shown["running"]) == (None, {})

    now = int(time.time() * 1000)
    assert store.acquire(TOKEN, 30_000)
    assert store.set_roster(TOKEN, WEB, now - 12_000)
    guard = RunGuard("skip", "task-81dac4fc", 30_000)
    assert store.claim(TOKEN, {"import-orders": (now, "fp")}, {"import-orders": guard})
    done = run("hashbeat", "status", "-A", FANNED)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("workers ")))
    assert lines[at].startswith("workers   2 live in the leader's census of "), lines[at]
    assert lines[at + 1] == "  celery@web-1, celery@web-2"
    assert lines[at + 2] == "running   1 run queued or running"
    assert lines[at + 3].split() == ["ENTRY", "TASK", "ID"]
    assert lines[at + 4].split() == ["import-orders", "task-81dac4fc"]

    shown = json.loads(run("hashbeat", "status", "-A", FANNED, "--json").stdout)
    assert shown["workers"]["nodes"] == WEB
    assert shown["workers"]["resolved"].endswith("+00:00")
    assert 12_000 <= shown["workers"]["resolved_ms_ago"] < 60_000
    assert shown["running"] == {"import-orders": "task-81dac4fc"}
    assert shown["last_slots"] == {"import-orders": now}  # the old keys are still there


def test_explain_a_sub_entry_key(run: Run) -> None:
    """A sub-entry's key holds two "@"; it seeds every field as any other key does
    (docs/design.md §3)."""
    key = "refresh@celery@web-1"
    second, minute_, hour = seeded(key, "second") % 60, minute(key), seeded(key, "hour") % 24
    args = ["H H H * * *", "--key", key, "--after", "2026-06-01", "-n", "2", "--json"]
    done = run("hashbeat", "explain", *args)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["resolved"] == f"{second} {minute_} {hour} * * *"
    first = f"2026-06-01T{hour:02d}:{minute_:02d}:{second:02d}+00:00"
    assert [fire["utc"] for fire in shown["next"]] == [first, first.replace("-01T", "-02T")]


def test_spread_counts_the_copies_it_knows(run: Run) -> None:
    done = run("hashbeat", "spread", "-A", FANNED, "--date", "2026-03-09", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    # import-orders, the two copies of rotate-logs and celery.backend_cleanup
    assert shown["what"] == "4 entries"
    assert shown["hashed"]["total"] == 24 * 12 + 2 * 24 + 1  # backend_cleanup once a day
    assert "entry 'refresh' runs on every live worker" in done.stderr
    assert "no leader has taken a census" in done.stderr


def test_spread_counts_the_copies_on_the_workers_of_the_census(run: Run, store: Store) -> None:
    """With the leader's census in the store, the "*" entry counts as its copies, one a worker,
    each an hourly slot at its own minute."""
    assert store.acquire(TOKEN, 30_000)
    assert store.set_roster(TOKEN, WEB, int(time.time() * 1000))
    done = run("hashbeat", "spread", "-A", FANNED, "--date", "2026-03-09", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["what"] == "6 entries"  # and refresh@celery@web-1, refresh@celery@web-2
    assert shown["hashed"]["total"] == 24 * 12 + 2 * 24 + 1 + 2 * 24
    assert "refresh" not in done.stderr


def test_a_fanned_entry_that_cannot_run(run: Run, tmp_path: Path) -> None:
    """A "*" entry is checked even before its workers are known, and its error names it."""
    config = {
        "hashbeat_store_url": f"sqlite:///{tmp_path}/s.sqlite",
        "beat_schedule": {
            "everywhere": {"task": "t", "schedule": 30, "workers": "*", "catch_up": "often"},
            "routed": {"task": "t", "schedule": 30, "workers": "*", "options": {"queue": "q"}},
            "named": {"task": "t", "schedule": 30, "workers": ["web-1"]},
        },
    }
    env = {"HASHBEAT_CONFIG": json.dumps(config)}
    done = run("hashbeat", "schedule", "-A", "tests.beat.config_app", "--no-store", env=env)
    assert done.returncode == Exit.SETUP, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("cannot run: ")]
    assert len(errors) == 3, done.stdout
    assert errors[0].startswith("cannot run: entry 'everywhere': "), errors[0]
    assert "probe" not in errors[0]
    assert "entry 'named': 'workers' lists 'web-1'" in errors[1]
    assert "entry 'routed'" in errors[2] and "['queue']" in errors[2]
    assert done.stderr.strip() == "Error: entries that cannot run: everywhere, named, routed"


def test_status_says_which_entries_it_does_not_list_and_why(run: Run, store: Store) -> None:
    """Four entries (with Celery's own); the "*" one has no copy before a census, and --limit 2
    cuts the rows of the others: status says both, instead of listing two silently."""
    done = run("hashbeat", "status", "-A", FANNED, "--limit", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("entries ")))
    assert lines[at].startswith("entries   4 in the schedule; 2 listed"), lines[at]
    rows = [line.split()[0] for line in lines[at + 2 : at + 4]]
    assert rows == ["celery.backend_cleanup", "import-orders"]
    assert "  ... and 2 more not listed (--limit 4, or --json)" in lines
    [refresh] = [line for line in lines if line.startswith("  not listed: refresh: ")]
    assert "no copy on any worker" in refresh
    shown = json.loads(run("hashbeat", "status", "-A", FANNED, "--json").stdout)
    assert shown["entry_count"] == 4
    assert set(shown["entries"]) == {
        "celery.backend_cleanup",
        "import-orders",
        "rotate-logs@celery@web-1",
        "rotate-logs@celery@web-2",
    }
    assert set(shown["not_listed"]) == {"refresh"}


def test_status_shows_last_slots_to_the_millisecond(run: Run, store: Store) -> None:
    """A column of instants lines up: a slot on a whole second shows its ".000" too."""
    whole = (int(time.time()) - 60) * 1000
    assert store.acquire(TOKEN, 30_000)
    assert store.claim(TOKEN, {"import-orders": (whole, "fp"), "rotate-logs": (whole + 7, "fp")})
    done = run("hashbeat", "status", "-A", FANNED)
    assert done.returncode == 0, done.stderr
    cells = {cell[0]: cell[1] for cell in map(split_cells, done.stdout.splitlines()) if cell}
    moment = datetime.fromtimestamp(whole / 1000, timezone.utc)
    assert cells["import-orders"] == f"{moment:%Y-%m-%d %H:%M:%S}.000 UTC"
    assert cells["rotate-logs"] == f"{moment:%Y-%m-%d %H:%M:%S}.007 UTC"


def split_cells(line: str) -> list[str]:
    """The cells of an indented two-column-apart table row of the enqueued slots, or []."""
    cells = re.split(r"\s{2,}", line.strip())
    return cells if len(cells) == 3 and cells[1].endswith(" UTC") else []


def test_a_fanned_out_entry_shows_its_copies_slots_not_its_own(run: Run, store: Store) -> None:
    """The "*" entry itself never fires: its copies do, each at the minute of its own key. What
    entries and show list for it are those copies' slots, and before a census, none."""
    listed = json.loads(run("hashbeat", "entries", "-A", FANNED, "--json").stdout)
    assert next(v for v in listed if v["name"] == "refresh")["next_slots"] == []
    assert store.acquire(TOKEN, 30_000)
    nodes = ["celery@web-1", "celery@web-3"]
    assert store.set_roster(TOKEN, nodes, int(time.time() * 1000))
    minutes = {minute(f"refresh@{node}") for node in nodes}
    listed = json.loads(run("hashbeat", "entries", "-A", FANNED, "--json").stdout)
    slots = next(v for v in listed if v["name"] == "refresh")["next_slots"]
    shown = json.loads(run("hashbeat", "show", "refresh", "-A", FANNED, "--json").stdout)
    assert shown["next_slots"] == slots and len(slots) == 10
    assert {int(slot[14:16]) for slot in slots} == minutes, (slots, minutes)
    assert slots == sorted(slots)
    copy = json.loads(
        run("hashbeat", "show", "refresh@celery@web-3", "-A", FANNED, "--json").stdout
    )
    assert int(copy["next_slot"][14:16]) == minute("refresh@celery@web-3")
