"""``hashbeat audit`` (docs/design.md §19) in real processes: every operator change made by the
commands lands in the store's trail, newest first, with who made it and why."""

from __future__ import annotations

import getpass
import json
import socket
import subprocess
from collections.abc import Callable

Run = Callable[..., subprocess.CompletedProcess[str]]
APP = "tests.cli.proj"
TASK = "tests.cli.proj.refresh_all"


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_each_change_is_in_the_trail_newest_first_with_who_and_why(run: Run) -> None:
    promises = ["--max-lateness", "30", "--pause-after-failures", "3"]
    add = ["add", "nightly", "--task", TASK, "--every", "60", *promises, "--reason", "ticket 7"]
    ok(run("hashbeat", *add, "-A", APP))
    ok(run("hashbeat", "update", "nightly", "--every", "120", "-A", APP))
    ok(run("hashbeat", "pause", "nightly", "--reason", "supplier outage", "-A", APP))
    ok(run("hashbeat", "resume", "nightly", "--reason", "back", "-A", APP))
    ok(run("hashbeat", "trigger", "nightly", "-A", APP))
    ok(run("hashbeat", "remove", "nightly", "--reason", "retired", "-A", APP))
    trail = json.loads(ok(run("hashbeat", "audit", "nightly", "--json", "-A", APP)))
    assert [change["action"] for change in trail] == [
        "remove",
        "trigger",
        "resume",
        "pause",
        "update",
        "add",
    ]
    times = [change["at_ms"] for change in trail]
    assert times == sorted(times, reverse=True)
    for change in trail:
        assert change["name"] == "nightly"
        assert change["who"]["os_user"] == getpass.getuser()
        assert change["who"]["host"] == socket.gethostname()
    pause, update, add = trail[3], trail[4], trail[5]
    assert pause["reason"] == "supplier outage"
    assert pause["after"]["paused"] is True and pause["before"] is None
    assert add["before"] is None and add["after"]["task"] == TASK
    assert add["reason"] == "ticket 7"
    assert (add["after"]["max_lateness"], add["after"]["pause_after_failures"]) == (30, 3)
    assert (trail[2]["reason"], trail[0]["reason"]) == ("back", "retired")
    assert update["before"]["schedule"] != update["after"]["schedule"]
    assert trail[0]["before"]["task"] == TASK and trail[0]["after"] is None
    table = ok(run("hashbeat", "audit", "-A", APP))
    assert "supplier outage" in table and f"{getpass.getuser()}@{socket.gethostname()}" in table


def test_a_refused_change_leaves_no_record(run: Run) -> None:
    done = run("hashbeat", "pause", "no-such-entry", "-A", APP)
    assert done.returncode == 3
    assert ok(run("hashbeat", "audit", "-A", APP)).strip() == "no changes recorded"
