"""The ``hashbeat`` commands that change the schedule, as real processes (docs/operations.md): no
password ever printed, a read-only store said as such (exit 4), an entry that is not there exit 3,
an update that lost a race with another change exit 5 and nothing lost, resume of an entry that
is not paused says so, and the options and ``--json`` that add, update and trigger take."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import redis

from celery_hashbeat import hashcron
from celery_hashbeat.cli.output import Exit
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.definitions import decode
from celery_hashbeat.store import Store
from tests.cli import proj
from tests.cli.conftest import APP, BIN, ROOT
from tests.support.proxy import FaultProxy
from tests.support.redis_server import RedisProcess, free_port

Run = Callable[..., subprocess.CompletedProcess[str]]
TASK = "tests.cli.proj.refresh_all"
SECRET = "S3cr3t-pw"


def hashbeat(run: Run, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {} if url is None else {"HASHBEAT_TEST_STORE_URL": url}
    return run("hashbeat", *args, "-A", APP, env=env)


def stored(store: Store, name: str) -> dict[str, object]:
    text = store.controls_of(name)[0]
    assert text is not None
    read = decode(name, text)
    return {**read.definition, "revision": read.revision}


def test_no_password_is_printed_and_an_unknown_entry_exits_3(run: Run) -> None:
    with RedisProcess(password=SECRET) as server:
        for args in (
            ["pause", "nope"],
            ["resume", "nope"],
            ["trigger", "nope"],
            ["show", "nope"],
            ["remove", "nope"],
            ["update", "nope", "--every", "9"],
            ["backfill", "nope", "--from", "2026-01-01T00:00Z", "--to", "2026-01-02T00:00Z"],
        ):
            done = hashbeat(run, *args, url=server.url)
            assert done.returncode == Exit.SETUP, (args, done.stderr)
            assert SECRET not in done.stdout + done.stderr, args
            if args[0] in ("pause", "resume", "trigger", "show", "backfill"):  # these name it
                assert "redis://:***@127.0.0.1" in done.stderr, args
            assert "Traceback" not in done.stderr


def test_an_unreachable_store_prints_no_password_and_exits_4(run: Run) -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0"
    backfill = ["backfill", "nope", "--from", "2026-01-01T00:00Z", "--to", "2026-01-02T00:00Z"]
    for args in (["pause", "nope"], ["trigger", "nope"], ["show", "nope"], ["entries"], backfill):
        done = hashbeat(run, *args, url=url)
        assert done.returncode == Exit.STORE, (args, done.stderr)
        assert SECRET not in done.stdout + done.stderr, args


def test_a_replica_is_said_to_be_read_only_with_exit_4(run: Run) -> None:
    with RedisProcess() as server:
        client = redis.Redis.from_url(server.url)
        client.replicaof("127.0.0.1", free_port())  # a primary that is not there: read-only
        client.close()
        done = hashbeat(run, "pause", "refresh-prices", url=server.url)
    assert done.returncode == Exit.STORE, done.stderr
    assert "read-only" in done.stderr and "primary" in done.stderr
    assert "not answering" not in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_resume_of_an_entry_that_is_not_paused_says_so(run: Run, store: Store) -> None:
    done = hashbeat(run, "resume", "refresh-prices")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("'refresh-prices' is not paused; nothing changed")
    assert store.controls_of("refresh-prices") == (None, None)


def test_add_and_update_take_expires_priority_and_the_catch_up_window(
    run: Run, store: Store
) -> None:
    done = hashbeat(
        run, "add", "report", "--task", TASK, "--cron", "H 6 * * *", "--expires", "30",
        "--priority", "5", "--catch-up-window", "600", "--queue", "reports", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (shown["done"], shown["entry"], shown["revision"]) == ("added", "report", 1)
    assert shown["next_slot"].endswith("+00:00")
    assert shown["definition"]["options"] == {"expires": 30.0, "priority": 5, "queue": "reports"}
    definition = stored(store, "report")
    assert definition["catch_up_window"] == 600.0
    assert definition["options"] == {"expires": 30.0, "priority": 5, "queue": "reports"}

    done = hashbeat(run, "update", "report", "--priority", "7", "--unset", "expires")
    assert done.returncode == 0, done.stderr
    definition = stored(store, "report")
    assert definition["options"] == {"priority": 7, "queue": "reports"}
    assert (definition["catch_up_window"], definition["revision"]) == (600.0, 2)

    done = hashbeat(run, "update", "report", "--priority", "high")
    assert done.returncode == Exit.USAGE
    assert "--priority: give a whole number of at least 0, not 'high'" in done.stderr


def test_trigger_json_says_what_became_of_it(run: Run, store: Store) -> None:
    done = hashbeat(run, "trigger", "refresh-prices", "--json")
    assert done.returncode == 0, done.stderr
    triggered = json.loads(done.stdout)
    assert triggered["entry"] == "refresh-prices" and triggered["forced"] is False
    assert triggered["overlap"] == "allow" and triggered["running"] is None
    assert [json.loads(text)["id"] for text in store.triggers()] == [triggered["task_id"]]


def test_an_update_that_loses_a_race_exits_5_and_no_change_is_lost(
    redis_url: str, key_prefix: str, store: Store, tmp_path: Path
) -> None:
    """Operator A runs ``hashbeat update`` through a slow link (every reply 0.5 s late); the
    moment Redis runs A's read of the definition, operator B (Python, in this process) changes
    another field. A's write then comes after B's: A must be refused, and B's change kept."""
    proj.app.conf.update(hashbeat_store_url=redis_url, hashbeat_key_prefix=key_prefix)
    b = ScheduleAdmin(proj.app)
    b.add("report", task=TASK, schedule=hashcron("H 6 * * *"))
    port = int(redis_url.rsplit(":", 1)[1].split("/", maxsplit=1)[0])
    # Redis' MONITOR, read raw: each command a line, as the server runs it.
    monitor = socket.create_connection(("127.0.0.1", port))
    monitor.sendall(b"MONITOR\r\n")
    seen = threading.Event()
    read_by_a = f'] "HGET" "{{{key_prefix}}}:defs" "report"'.encode()

    def watch() -> None:
        for line in monitor.makefile("rb"):
            if read_by_a in line and b"[0 lua]" not in line:  # A's read before its write
                b.update("report", kwargs={"from": "b"})
                seen.set()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with FaultProxy(port) as proxy:
        proxy.delay(0.5)
        a = subprocess.run(
            [str(BIN / "hashbeat"), "update", "report", "--args", "[42]", "-A", APP],
            cwd=tmp_path,
            env={
                "PATH": str(Path(sys.executable).parent),
                "PYTHONPATH": str(ROOT),
                "HASHBEAT_TEST_STORE_URL": proxy.url(),
                "HASHBEAT_TEST_PREFIX": key_prefix,
            },
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    watcher.join(5)
    monitor.close()
    b.close()
    assert seen.is_set(), (a.returncode, a.stdout, a.stderr)
    definition = stored(store, "report")
    assert definition["kwargs"] == {"from": "b"}  # B's change is kept
    assert a.returncode == Exit.CONFLICT, (a.returncode, a.stdout, a.stderr)
    assert "read it again" in a.stderr and "Traceback" not in a.stderr
    assert definition["args"] == ()  # and A's, refused, is not half there


def test_store_mistakes_are_said_in_words_with_exit_4(run: Run) -> None:
    with RedisProcess(password=SECRET) as server:
        no_password = server.url.replace(f":{SECRET}@", "")
        done = hashbeat(run, "pause", "refresh-prices", url=no_password)
        assert done.returncode == Exit.STORE, done.stderr
        assert "asks for a password, and hashbeat_store_url gives none" in done.stderr
        assert "HELLO" not in done.stderr
        done = hashbeat(run, "pause", "refresh-prices", url=server.url.replace("/0", "/99"))
        assert done.returncode == Exit.STORE, done.stderr
        assert "has no such database" in done.stderr and "ResponseError" not in done.stderr
        assert SECRET not in done.stderr


def test_an_expression_is_echoed_as_written(run: Run) -> None:
    done = hashbeat(run, "add", "c", "--task", TASK, "--cron", "*/5x * * * *")
    assert done.returncode == Exit.USAGE
    assert "cannot read '*/5x' in the minute field" in done.stderr


def test_every_exit_code_is_documented_in_operations_md() -> None:
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = text.split("## The hashbeat command", 1)[1].split("\n### ", 1)[0]
    documented = {
        int(line.split("|")[1]) for line in section.splitlines() if line.startswith("| ") and
        line.split("|")[1].strip().isdigit()
    }  # fmt: skip
    assert documented == {int(code) for code in Exit}


def test_shell_completion_works_as_operations_md_says(run: Run) -> None:
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    assert 'eval "$(_HASHBEAT_COMPLETE=bash_source hashbeat)"' in text
    script = run("hashbeat", env={"_HASHBEAT_COMPLETE": "bash_source"})
    assert script.returncode == 0 and "complete " in script.stdout, script.stderr
    done = run(
        "hashbeat",
        env={
            "_HASHBEAT_COMPLETE": "bash_complete",
            "COMP_WORDS": "hashbeat tri",
            "COMP_CWORD": "1",
        },
    )
    assert done.stdout.split() == ["plain,trigger"], done.stdout
