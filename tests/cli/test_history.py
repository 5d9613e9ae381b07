"""``hashbeat show NAME`` and the per-entry lines of ``hashbeat status`` (docs/design.md §14), read
from histories written to the store as the beat and the workers write them."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from datetime import datetime, timezone

from click.testing import Result

from celery_hashbeat.cli.output import Exit
from celery_hashbeat.observe.history import Record, encode
from celery_hashbeat.store import Store

Invoke = Callable[..., Result]
Run = Callable[..., subprocess.CompletedProcess[str]]
BEAT = "host:7:abc"


def written(store: Store, now: int) -> None:
    """refresh-prices: sent, run and succeeded; then skipped for overlap; then missed in an
    outage (three slots); and one record of two hours ago, outside the status window."""
    slot = now - 180_000
    records = [
        Record("sent", now - 7_200_000, now - 7_200_000, BEAT),
        Record("sent", slot, slot + 4, BEAT, "task-1", lateness_ms=4),
        Record("started", slot, slot + 20, "celery@w1", "task-1"),
        Record("succeeded", slot, now - 60_000, "celery@w1", "task-1", run_ms=119_980),
        Record("skipped", now - 120_000, now - 120_000, BEAT, "task-1", "overlap"),
        Record("missed", now - 60_000, now, BEAT, reason="catch_up=skip", count=3),
    ]
    store.record([*(("refresh-prices", encode(r)) for r in records), ("refresh-prices", "x")])


def test_show_prints_the_history_newest_first(invoke: Invoke, app_store: Store) -> None:
    now = int(time.time() * 1000)
    written(app_store, now)
    result = invoke("show", "refresh-prices", "-A", "tests.cli.proj")
    assert result.exit_code == 0, result.output
    head, _, history = result.output.partition("\n\n")
    assert head.startswith("entry       refresh-prices  (config)\n")
    assert "\nnext slots  " in head
    lines = history.splitlines()
    assert lines[0].split() == ["WHEN", "OUTCOME", "SLOT", "BY", "TASK", "ID", "DETAIL"]
    outcomes = [line.split()[3] for line in lines[1:]]
    # By when each happened: the run succeeded a minute after the skip, though written before.
    assert outcomes == ["missed", "succeeded", "skipped", "started", "sent", "sent"]
    assert lines[1].endswith("catch_up=skip, 3 slots")
    assert lines[3].endswith("overlap")
    assert lines[2].endswith("ran 119980 ms") and "celery@w1" in lines[2]
    assert lines[5].endswith("4 ms late")

    shown = json.loads(invoke("show", "refresh-prices", "-A", "tests.cli.proj", "--json").output)
    assert shown["entry"] == "refresh-prices" and shown["next_slot"]
    assert shown["history"][0]["outcome"] == "missed"
    assert shown["history"][0]["count"] == 3
    assert shown["history"][1]["run_ms"] == 119_980


def test_show_of_an_entry_without_history_says_what_to_check(
    invoke: Invoke, app_store: Store
) -> None:
    result = invoke("show", "no-such-entry", "-A", "tests.cli.proj")
    assert result.exit_code == Exit.SETUP  # 3: no entry of that name (docs/operations.md)
    assert "no entry 'no-such-entry', and no history" in result.output
    assert "check the name" in result.output


def test_status_shows_next_slot_last_outcome_and_the_hours_counts(
    invoke: Invoke, app_store: Store
) -> None:
    now = int(time.time() * 1000)
    written(app_store, now)
    result = invoke("status", "-A", "tests.cli.proj", "--limit", "20")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    row = next(line.split() for line in lines if line.startswith("  refresh-prices "))
    # name, "in Xm..", "missed", "Xms ago", then sent, skipped and missed of the last hour
    assert row[1] == "in" and row[3] == "missed" and row[-3:] == ["1", "1", "3"], row
    shown = json.loads(invoke("status", "-A", "tests.cli.proj", "--json").output)
    entry = shown["entries"]["refresh-prices"]
    assert entry["last_hour"] == {"sent": 1, "skipped": 1, "missed": 3}
    assert entry["last_outcome"]["outcome"] == "missed"
    assert entry["next_slot"].endswith("+00:00")
    assert shown["entries"]["sync"]["last_outcome"] is None


def test_newest_first_is_by_when_each_outcome_happened(run: Run, app_store: Store) -> None:
    """The worker writes started and succeeded as they happen; the beat's sent rides on a later
    store call, so the store receives it last. Shown newest first, it comes below them: by the
    instant of each outcome, a tie broken by the order of a slot's life, and a worker whose
    clock is behind the beat's never puts a task's start before its sending."""
    slot = (int(time.time()) - 300) * 1000  # a whole second: every instant ends in .000
    late = [
        Record("started", slot, slot + 5, "celery@w1", "task-1"),
        Record("succeeded", slot, slot + 1000, "celery@w1", "task-1", run_ms=995),
        Record("sent", slot, slot + 5, BEAT, "task-1", lateness_ms=5),
        # The next slot's worker is 40 ms behind the beat: its start reads as before the send.
        Record("started", slot + 2000, slot + 1960, "celery@w2", "task-2"),
        Record("sent", slot + 2000, slot + 2000, BEAT, "task-2", lateness_ms=0),
    ]
    app_store.record([("refresh-prices", encode(record)) for record in late])
    done = run("hashbeat", "show", "refresh-prices", "-A", "tests.cli.proj", "--json")
    assert done.returncode == 0, done.stderr
    order = [(r["outcome"], r["task_id"]) for r in json.loads(done.stdout)["history"]]
    assert order == [
        ("started", "task-2"),
        ("sent", "task-2"),
        ("succeeded", "task-1"),
        ("started", "task-1"),
        ("sent", "task-1"),
    ]
    done = run("hashbeat", "show", "refresh-prices", "-A", "tests.cli.proj", "--limit", "1")
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if "task-" in line]
    assert line.split()[3] == "started"
    done = run("hashbeat", "show", "refresh-prices", "-A", "tests.cli.proj")
    rows = [line for line in done.stdout.splitlines() if "task-" in line]
    # The WHEN and SLOT columns always carry milliseconds, ".000" too, so they line up.
    when = [row.split()[1] for row in rows]
    assert when == [
        stamp_clock(slot + 1960),
        stamp_clock(slot + 2000),
        stamp_clock(slot + 1000),
        stamp_clock(slot + 5),
        stamp_clock(slot + 5),
    ]


def stamp_clock(ms: int) -> str:
    """The time of day of ``ms`` in UTC, to the millisecond, as a table cell shows it."""
    moment = datetime.fromtimestamp(ms / 1000, timezone.utc)
    return f"{moment:%H:%M:%S}.{ms % 1000:03d}"
