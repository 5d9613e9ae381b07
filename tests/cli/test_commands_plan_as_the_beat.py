"""``hashbeat schedule``, ``status`` and ``entries`` show the next slots the leader itself
plans: the same entries (Celery's own, stored ones, copies on workers), the same
balanced placements and an interval counted from the anchor the leader set. A real Scheduler
leads on the real Redis; the commands run as real processes."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime, timezone

import pytest
from prometheus_client.parser import text_string_to_metric_families

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.control.definitions import encode
from celery_hashbeat.control.pause_and_trigger import Pause, encode_pause
from celery_hashbeat.store import Store
from tests.cli import planned
from tests.support.beat_fixtures import run_for
from tests.support.redis_server import free_port

Run = Callable[..., subprocess.CompletedProcess[str]]
APP = "tests.cli.planned"


@pytest.fixture
def pointed(monkeypatch: pytest.MonkeyPatch, redis_url: str, key_prefix: str) -> None:
    """The in-process test app pointed at this test's store."""
    monkeypatch.setitem(planned.app.conf, "hashbeat_store_url", redis_url)
    monkeypatch.setitem(planned.app.conf, "hashbeat_key_prefix", key_prefix)


@pytest.fixture
def leader(pointed: None) -> Iterator[Scheduler]:
    """A beat of the test app that leads, with its entries planned; it ticks no more, so its
    plan stays what it was when the commands run."""
    beat = Scheduler(planned.app, lazy=True)
    beat.setup_schedule()
    yield beat
    beat.close()


def lead(beat: Scheduler) -> int:
    """Tick until the beat leads and has planned every entry; when it did (epoch ms)."""
    for _ in range(50):
        beat.tick()
        if beat.is_leader and all(entry.slot is not None for entry in beat.entries.values()):
            return beat.now_ms()
        time.sleep(0.05)
    raise AssertionError("the beat did not lead")


def store_entry(store: Store, name: str, definition: dict[str, object]) -> None:
    """An entry added at run time, as ScheduleAdmin stores it."""
    store.edit(name, {"definition": encode(name, definition, int(time.time() * 1000))})


def comparable(beat: Scheduler, since_ms: int, until_ms: int) -> dict[str, int]:
    """The beat's planned slot per entry, leaving out the few that fell due while the commands
    ran (those the commands rightly show as their next slot after)."""
    slots = {name: entry.slot for name, entry in beat.entries.items()}
    return {
        name: slot
        for name, slot in slots.items()
        if slot is not None and not since_ms <= slot <= until_ms + 1000
    }


def test_schedule_shows_every_entry_the_leader_runs_at_the_slot_it_planned(
    run: Run, store: Store, leader: Scheduler
) -> None:
    store_entry(store, "stored-poll", {"task": "planned.ping", "schedule": 45.0})
    balanced = hashcron("H * * * *", balanced=True)
    store_entry(store, "stored-report", {"task": "planned.report", "schedule": balanced})
    planned_at = lead(leader)
    assert {"celery.backend_cleanup", "stored-poll", "fanned@celery@a"} <= leader.entries.keys()
    done = run("hashbeat", "schedule", "-A", APP, "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["entries"]}
    expected = comparable(leader, planned_at, int(time.time() * 1000))
    assert len(expected) >= len(leader.entries) - 3
    assert {name for name, row in rows.items() if row["next_ms"] is not None} == set(leader.entries)
    shown = {name: rows[name]["next_ms"] for name in expected}
    assert shown == expected
    assert rows["fanned@celery@b"]["parent"] == "fanned"


def test_status_counts_a_plain_interval_from_the_leaders_anchor(
    run: Run, store: Store, leader: Scheduler
) -> None:
    lead(leader)
    anchor = store.fences(["heartbeat"])["heartbeat"]
    assert anchor.anchor, "the leader anchors an interval it never sent"
    planned_slot = leader.entries["heartbeat"].slot
    assert planned_slot == anchor.slot + 90_000
    time.sleep(1.2)  # a command that counted from its own now would be a second or more later
    done = run("hashbeat", "status", "-A", APP, "--json", "--limit", "0")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)["entries"]["heartbeat"]["next_slot"]
    assert int(datetime.fromisoformat(shown).timestamp() * 1000) == planned_slot


def runs_of(store: Store, name: str) -> int:
    fence = store.fences([name]).get(name)
    return 0 if fence is None else fence.runs


def line_of(output: str, name: str) -> list[str]:
    """The cells of the table row of entry ``name`` (cells are two or more spaces apart)."""
    [line] = [line for line in output.splitlines() if line.startswith(f"{name} ")]
    return re.split(r"\s{2,}", line)


def pause(store: Store, name: str) -> None:
    """An operator's pause, as ScheduleAdmin stores it."""
    record = encode_pause(Pause(True, "maintenance", int(time.time() * 1000)))
    store.edit(name, {"pause": record})


def test_no_command_lists_slots_of_entries_that_will_not_fire(
    run: Run, store: Store, leader: Scheduler
) -> None:
    """A paused entry (and the copies of a paused fanned-out one) and an entry whose max_runs
    are used up are sent no more by the leader, so no view lists a next slot for them."""
    store_entry(store, "once", {"task": "planned.ping", "schedule": 1.0, "max_runs": 1})
    lead(leader)
    run_for(leader, 5, until=lambda: runs_of(store, "once") >= 1)
    assert store.fences(["once"])["once"].runs == 1
    pause(store, "heartbeat")
    pause(store, "fanned")
    run_for(leader, 1.5)  # the leader parks them at their next slot; none is sent
    done = run("hashbeat", "schedule", "-A", APP, "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["entries"]}
    silent = ["heartbeat", "fanned@celery@a", "fanned@celery@b", "once"]
    assert {name: rows[name]["next_ms"] for name in silent} == dict.fromkeys(silent)
    assert rows["report-0"]["next_ms"] is not None
    done = run("hashbeat", "schedule", "-A", APP)
    assert done.returncode == 0, done.stderr
    assert "paused" in line_of(done.stdout, "heartbeat")[-2]
    assert "max_runs" in line_of(done.stdout, "once")[-2]

    done = run("hashbeat", "status", "-A", APP, "--json")
    assert done.returncode == 0, done.stderr
    entries = json.loads(done.stdout)["entries"]
    assert {name: entries[name]["next_slot"] for name in silent} == dict.fromkeys(silent)
    assert entries["report-0"]["next_slot"] is not None

    done = run("hashbeat", "entries", "-A", APP, "--json")
    assert done.returncode == 0, done.stderr
    views = {view["name"]: view for view in json.loads(done.stdout)}
    assert {name: views[name]["next_slots"] for name in ("heartbeat", "fanned", "once")} == {
        "heartbeat": [],
        "fanned": [],
        "once": [],
    }
    for name in ("heartbeat", "fanned@celery@a", "once"):
        done = run("hashbeat", "show", name, "-A", APP, "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["next_slot"] is None, name


def test_schedule_lists_stored_entries_when_beat_schedule_is_empty(run: Run, store: Store) -> None:
    """An app that keeps every entry in the store: ``hashbeat schedule`` reads the store all
    the same, and lists them with Celery's own entry."""
    store_entry(store, "stored-poll", {"task": "planned.ping", "schedule": 45.0})
    done = run("hashbeat", "schedule", "-A", "tests.cli.stored_only", "--json")
    assert done.returncode == 0, done.stderr
    names = [row["name"] for row in json.loads(done.stdout)["entries"]]
    assert names == ["celery.backend_cleanup", "stored-poll"]
    done = run("hashbeat", "schedule", "-A", "tests.cli.stored_only")
    assert done.returncode == 0, done.stderr
    assert "stored-poll" in done.stdout and "beat_schedule is empty" not in done.stdout


def scraped_entries(port: int) -> float:
    """``hashbeat_entries`` as Prometheus reads it from a beat's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == "hashbeat_entries":
                return float(sample.value)
    raise AssertionError("no hashbeat_entries in /metrics")


def test_leader_standby_and_commands_count_the_same_entries(
    monkeypatch: pytest.MonkeyPatch, run: Run, store: Store, pointed: None
) -> None:
    """One definition of "the entries": every definition by name, a fanned-out entry once,
    the stored ones and Celery's own included; the leader and a standby export it alike, and
    the commands count it too."""
    store_entry(store, "stored-poll", {"task": "planned.ping", "schedule": 45.0})
    ports = [free_port(), free_port()]
    beats = []
    for port in ports:
        monkeypatch.setitem(planned.app.conf, "hashbeat_http_port", port)
        beat = Scheduler(planned.app, lazy=True)
        beat.setup_schedule()
        beats.append(beat)
    try:
        lead(beats[0])
        run_for(beats[1], 1.5)
        run_for(beats[0], 1.5)
        assert beats[0].is_leader and not beats[1].is_leader
        listed = json.loads(run("hashbeat", "entries", "-A", APP, "--json").stdout)
        expected = len(planned.BALANCED) + 5  # heartbeat, pulse, fanned, backend_cleanup, stored
        assert len(listed) == expected
        assert [scraped_entries(port) for port in ports] == [expected, expected]
        assert [beat.status()["entries"] for beat in beats] == [expected, expected]
        shown = json.loads(run("hashbeat", "status", "-A", APP, "--json").stdout)
        assert shown["entry_count"] == expected
    finally:
        for beat in beats:
            beat.close()


def test_every_view_counts_a_timedelta_entry_from_the_leaders_anchor(
    run: Run, store: Store, leader: Scheduler
) -> None:
    """A timedelta entry's first slot is its anchor (the instant the leader recorded in the
    store) plus the period, in every command; never the command's own now plus the period."""
    lead(leader)
    anchor = store.fences(["pulse"])["pulse"]
    assert anchor.anchor
    first = anchor.slot + 75_000
    assert leader.entries["pulse"].slot == first
    time.sleep(1.2)  # a command counting from its own now would show a second or more later
    done = run("hashbeat", "schedule", "-A", APP, "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["entries"]}
    assert rows["pulse"]["next_ms"] == first
    shown = json.loads(run("hashbeat", "status", "-A", APP, "--json").stdout)["entries"]
    assert shown["pulse"]["next_slot"] == slot_iso_ms(first)
    views = {view["name"]: view for view in json.loads(run("hashbeat", "entries", "-A", APP,
                                                           "--json").stdout)}  # fmt: skip
    assert views["pulse"]["next_slots"][:2] == [slot_iso_ms(first), slot_iso_ms(first + 75_000)]
    detail = json.loads(run("hashbeat", "show", "pulse", "-A", APP, "--json").stdout)
    assert detail["next_slots"][0] == slot_iso_ms(first)


def slot_iso_ms(ms: int) -> str:
    """An instant as the commands' --json writes it: ISO 8601 in UTC, to the millisecond."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")


def test_schedule_without_the_store_does_not_guess_an_intervals_next_run(run: Run) -> None:
    """An interval's slots count from the anchor the leader keeps in the store: with --no-store
    its next run is not known, and the row says why instead of counting from the command's now."""
    done = run("hashbeat", "schedule", "-A", APP, "--no-store", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["entries"]}
    for name in ("pulse", "heartbeat"):
        assert rows[name]["next_ms"] is None, rows[name]
        assert rows[name]["silent"] == "counts from the leader's anchor (--no-store)"
    assert rows["report-0"]["next_ms"] is not None  # a cron slot needs no anchor
    done = run("hashbeat", "schedule", "-A", APP, "--no-store")
    assert "counts from the leader's anchor (--no-store)" in line_of(done.stdout, "pulse")[-1]
