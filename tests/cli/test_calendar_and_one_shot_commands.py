"""``hashbeat add --exclude/--on-excluded/--at``, ``show``, ``schedule`` and ``explain`` for
calendars and one-shots (docs/design.md §20, §21), as an operator runs them: real processes
against a real Redis store. Each refusal is one line with exit code 2 that stores nothing."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import datetime, time, timedelta, timezone

from celery_hashbeat.control.definitions import decode
from celery_hashbeat.store import Store
from tests.cli.conftest import APP

Run = Callable[..., subprocess.CompletedProcess[str]]
TASK = "tests.cli.proj.refresh_all"


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def refused(done: subprocess.CompletedProcess[str], *words: str) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def test_add_with_exclude_stores_the_calendar_and_show_says_it(run: Run, store: Store) -> None:
    out = ok(
        run(
            "hashbeat",
            "add",
            "report",
            "-A",
            APP,
            "--task",
            TASK,
            "--cron",
            "H 9 * * *",
            "--exclude",
            "sat,sun",
            "--exclude",
            "holidays:US",
            "--on-excluded",
            "next_business_day",
        )
    )
    assert "added 'report'" in out
    stored = decode("report", store.controls_of("report")[0] or "").definition
    assert stored["exclude"] == ["sat,sun", "holidays:US"]
    assert stored["on_excluded"] == "next_business_day"

    shown = json.loads(ok(run("hashbeat", "show", "report", "-A", APP, "--json")))
    slots = [datetime.fromisoformat(s) for s in shown["next_slots"]]
    assert slots and all(slot.weekday() < 5 for slot in slots)


def test_add_refuses_a_calendar_that_never_fires_naming_the_entry(run: Run, store: Store) -> None:
    refused(
        run(
            "hashbeat",
            "add",
            "sat-job",
            "-A",
            APP,
            "--task",
            TASK,
            "--cron",
            "0 9 * * sat",
            "--exclude",
            "sat",
        ),
        "'sat-job'",
        "never fires",
    )
    refused(
        run("hashbeat", "add", "x", "-A", APP, "--task", TASK, "--every", "60", "--exclude", "bad"),
        "'x'",
        "'bad'",
        "weekday",
    )
    assert store.controls_of("sat-job")[0] is None and store.controls_of("x")[0] is None


def test_add_at_makes_a_one_shot_and_refuses_a_naive_or_past_instant(
    run: Run, store: Store
) -> None:
    soon = (datetime.now(timezone.utc) + timedelta(hours=2)).replace(microsecond=0)
    out = ok(run("hashbeat", "add", "launch", "-A", APP, "--task", TASK, "--at", soon.isoformat()))
    assert "added 'launch'" in out
    shown = ok(run("hashbeat", "show", "launch", "-A", APP))
    assert "to come, at" in shown and soon.strftime("%H:%M") in shown

    refused(
        run("hashbeat", "add", "naive", "-A", APP, "--task", TASK, "--at", "2030-01-01T09:00:00"),
        "'naive'",
        "no time zone",
    )
    past = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    refused(
        run(
            "hashbeat",
            "add",
            "late",
            "-A",
            APP,
            "--task",
            TASK,
            "--at",
            past,
            "--catch-up",
            "skip",
        ),
        "'late'",
        "has passed",
        "catch_up",
    )
    assert store.controls_of("naive")[0] is None and store.controls_of("late")[0] is None
    # catch_up "latest" (the default) allows it: it is sent as soon as a beat leads.
    ok(run("hashbeat", "add", "late", "-A", APP, "--task", TASK, "--at", past))


def test_explain_shows_excluded_and_moved_slots(run: Run) -> None:
    out = ok(
        run(
            "hashbeat",
            "explain",
            "0 9 * * *",
            "--tz",
            "America/New_York",
            "--after",
            "2026-12-24 00:00:00",
            "-n",
            "2",
            "--exclude",
            "sat,sun",
            "--exclude",
            "holidays:US",
            "--on-excluded",
            "next_business_day",
        )
    )
    lines = [line for line in out.splitlines() if line.startswith("  ")]
    assert [line.split()[:2] for line in lines] == [
        ["Thu", "2026-12-24"],
        ["Fri", "2026-12-25"],
        ["Sat", "2026-12-26"],
        ["Sun", "2026-12-27"],
        ["Mon", "2026-12-28"],
    ]
    assert lines[1].endswith("excluded, moved to Mon 2026-12-28")
    assert lines[4].endswith("moved from Fri 2026-12-25, Sat 2026-12-26, Sun 2026-12-27")


def test_schedule_lists_one_shots_and_calendars(run: Run) -> None:
    out = ok(run("hashbeat", "schedule", "-A", "tests.cli.calendar_proj", "--no-store"))
    launch = next(line for line in out.splitlines() if line.startswith("launch "))
    assert " at " in launch and "2031-06-01T09:00:00+02:00" in launch
    assert "weekdays: excluding sat,sun (skip)" in out
    assert "moved: excluding 2031-01-01 (previous_business_day)" in out
    rows = json.loads(
        ok(run("hashbeat", "schedule", "-A", "tests.cli.calendar_proj", "--no-store", "--json"))
    )["entries"]
    launch_row = next(row for row in rows if row["name"] == "launch")
    assert launch_row["kind"] == "at" and launch_row["next_ms"] == 1_938_063_600_000


def test_schedule_says_how_many_slots_before_the_next_run_its_calendar_leaves_out(
    run: Run,
) -> None:
    # Hourly at :00 (UTC), today and the next two days excluded: the next run is at midnight
    # three days on, and every hour from now until then is left out.
    now = datetime.now(timezone.utc)
    today = now.date()
    closed = f"{today}..{today + timedelta(days=2)}"
    out = ok(
        run(
            "hashbeat", "schedule", "-A", "tests.cli.calendar_proj", "--no-store",
            env={"HASHBEAT_CLOSED": closed},
        )
    )  # fmt: skip
    midnight = datetime.combine(today + timedelta(days=3), time(), tzinfo=timezone.utc)
    hours = int((midnight - now) // timedelta(hours=1))  # the :00 slots after now, before it
    line = next(line for line in out.splitlines() if line.startswith("closed: before"))
    assert line in (
        f"closed: before its next run, the calendar leaves out {n} slot(s) and moves 0"
        for n in (hours - 1, hours)  # an hour may pass before the command reads the clock
    ), line


def test_spread_counts_what_calendars_leave_out_and_move(run: Run) -> None:
    # A week from Saturday 2030-12-28: the weekend's two slots of "weekdays" are left out, and
    # "moved"'s slot of 2031-01-01 goes to 2030-12-31, where one already is: one slot, moved.
    args = ["-A", "tests.cli.calendar_proj", "--date", "2030-12-28", "--week", "--json"]
    shown = json.loads(ok(run("hashbeat", "spread", *args)))
    assert shown["calendars"] == {"excluded": 2, "moved": 1}
    # launch is outside the week; weekdays fires Mon-Fri (5), moved every day but the 1st (6),
    # and Celery's own celery.backend_cleanup every day (7).
    assert shown["hashed"]["total"] == 5 + 6 + 7


def test_show_marks_each_moved_slot_with_the_slot_it_came_from_and_lists_those_left_out(
    run: Run,
) -> None:
    """Saturday's 09:00 moves to Monday (it is the only slot: each Monday shown is a Saturday's);
    Wednesday's stand, and Sunday's are left out."""
    for name, cron, exclude, on in (
        ("weekly", "0 9 * * 6", "sat,sun", "next_business_day"),
        ("midweek", "0 9 * * 0,3", "sun", "skip"),
    ):
        added = ("add", name, "-A", APP, "--task", TASK, "--cron", cron, "--exclude", exclude)
        ok(run("hashbeat", *added, "--on-excluded", on))
    weekly = json.loads(ok(run("hashbeat", "show", "weekly", "-A", APP, "--json")))
    landed = [datetime.fromisoformat(slot) for slot in weekly["next_slots"]]
    assert landed and all(slot.weekday() == 0 and slot.time() == time(9) for slot in landed)
    assert weekly["moved_from"] == {
        slot.isoformat(timespec="milliseconds"): [
            (slot - timedelta(days=2)).isoformat(timespec="milliseconds")
        ]
        for slot in landed
    }
    text = ok(run("hashbeat", "show", "weekly", "-A", APP))
    first = landed[0] - timedelta(days=2)
    assert f"moved from {first:%Y-%m-%d} 09:00:00" in text.replace("T", " ")

    midweek = json.loads(ok(run("hashbeat", "show", "midweek", "-A", APP, "--json")))
    kept = [datetime.fromisoformat(slot) for slot in midweek["next_slots"]]
    assert kept and all(slot.weekday() == 2 for slot in kept)
    sundays = [
        kept[0] - timedelta(days=3) + timedelta(weeks=week)
        for week in range(len(kept) + 1)
        if datetime.now(timezone.utc)
        < kept[0] - timedelta(days=3) + timedelta(weeks=week)
        < kept[-1]
    ]
    assert midweek["left_out"] == [s.isoformat(timespec="milliseconds") for s in sundays]
    assert midweek["left_out_count"] == len(sundays) and "moved_from" not in midweek
    assert "left out" in ok(run("hashbeat", "show", "midweek", "-A", APP))
