"""``hashbeat plan`` (docs/design.md §19) against a real ``celery beat``: the beat records what it
runs, and the plan of another release of the app says what deploying it changes, with exit code
2, or 0 for the release the beat runs."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from celery_hashbeat.store import Store
from tests.support.processes import ProcessGroup, celery_beat_args, wait_until

pytestmark = pytest.mark.slow

Run = Callable[..., subprocess.CompletedProcess[str]]
APP = "tests.cli.deploy_app"


def test_a_plan_of_the_release_running_changes_nothing_and_another_release_lists_each_change(
    run: Run, store: Store, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    env = {"HASHBEAT_TEST_STORE_URL": redis_url, "HASHBEAT_TEST_PREFIX": key_prefix}
    with ProcessGroup(tmp_path) as group:
        beat = group.start("beat", celery_beat_args(APP, tmp_path, "beat"), env)
        assert wait_until(lambda: store.leader() is not None and store.schedules(), 30), (
            beat.log_tail()
        )
        holder = store.leader()
        leader = "" if holder is None else holder.token
        same = run("hashbeat", "plan", "-A", APP, env={"HASHBEAT_RELEASE": "1"})
        assert same.returncode == 0, same.stderr
        assert "no changes" in same.stdout
        done = run("hashbeat", "plan", "-A", APP, "--json", env={"HASHBEAT_RELEASE": "2"})
        assert done.returncode == 2, done.stderr
        shown = json.loads(done.stdout)
        text = run("hashbeat", "plan", "-A", APP, env={"HASHBEAT_RELEASE": "2"})
    assert text.returncode == 2, text.stderr
    assert shown["changed"] is True
    assert shown["running"]["beat"] == leader
    assert shown["running"]["digest"] != shown["candidate"]["digest"]
    changes = {entry["name"]: entry for entry in shown["entries"]}
    assert changes["gone"]["change"] == "removed"
    assert changes["report-192"]["change"] == "added" and changes["report-192"]["balanced"]
    hourly = changes["hourly"]
    assert hourly["change"] == "changed"
    before, after = hourly["fields"]["resolved"]["before"], hourly["fields"]["resolved"]["after"]
    assert before.count(" ") == after.count(" ") == 4 and before != after
    assert len(hourly["next_slots"]["before"]) == len(hourly["next_slots"]["after"]) == 3
    assert hourly["next_slots"]["before"] != hourly["next_slots"]["after"]
    assert "steady" not in changes
    # The added balanced entry took report-a's minute and moved it; report-b stayed.
    moved = changes["report-a"]
    assert moved["change"] == "moved" and moved["balanced"]
    assert set(moved["fields"]) <= {"schedule", "resolved"}
    assert moved["next_slots"]["before"] != moved["next_slots"]["after"]
    assert "report-b" not in changes
    assert "> report-a: moved (balanced)" in text.stdout
    assert "- gone: removed" in text.stdout and "+ report-192: added (balanced)" in text.stdout
    assert "~ hourly: changed" in text.stdout


def ics(day: str) -> str:
    return (
        "BEGIN:VCALENDAR\r\nVERSION:2.0\r\n"
        f"BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:{day}\r\nSUMMARY:closed\r\nEND:VEVENT\r\n"
        "END:VCALENDAR\r\n"
    )


def test_a_plan_after_an_ical_file_changed_says_the_schedule_changed(
    run: Run, store: Store, redis_url: str, key_prefix: str, tmp_path: Path
) -> None:
    path = tmp_path / "closed.ics"
    path.write_text(ics("20270310"))
    env = {"HASHBEAT_RELEASE": "1", "HASHBEAT_ICAL": str(path)}
    beat_env = {**env, "HASHBEAT_TEST_STORE_URL": redis_url, "HASHBEAT_TEST_PREFIX": key_prefix}
    with ProcessGroup(tmp_path) as group:
        beat = group.start("beat", celery_beat_args(APP, tmp_path, "beat"), beat_env)
        assert wait_until(lambda: store.leader() is not None and store.schedules(), 30), (
            beat.log_tail()
        )
        same = run("hashbeat", "plan", "-A", APP, env=env)
        path.write_text(ics("20270311"))
        changed = run("hashbeat", "plan", "-A", APP, env=env)
    assert same.returncode == 0, same.stdout + same.stderr
    assert changed.returncode == 2, changed.stdout + changed.stderr
    assert "a file an entry reads" in changed.stdout, changed.stdout


def test_a_plan_with_no_beat_running_says_there_is_nothing_to_compare_with(run: Run) -> None:
    done = run("hashbeat", "plan", "-A", APP)
    assert done.returncode == 3
    assert "no beat runs on this store" in done.stderr and "Traceback" not in done.stderr
