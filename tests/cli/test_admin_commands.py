"""``hashbeat add/update/remove/pause/resume/trigger/entries/show`` (docs/design.md §13) as an
operator runs them, in real processes, against a real Redis store and an SQLite one: what each
command prints, what it leaves in the store, and that every refusal is one line, with its exit
code, that changes nothing stored."""

from __future__ import annotations

import getpass
import json
import socket
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import cast

import pytest
import redis
from click.testing import Result

from celery_hashbeat import parse
from celery_hashbeat.cli.output import Exit
from celery_hashbeat.control.definitions import decode
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.settings import Settings
from celery_hashbeat.store import Store, StoreAuthError, open_store
from tests.cli import proj
from tests.cli.conftest import APP, ROOT
from tests.support.redis_server import RedisProcess

Run = Callable[..., subprocess.CompletedProcess[str]]
TASK = "tests.cli.proj.refresh_all"
NAME = "report-42"


@dataclass
class Target:
    """A store the test app is pointed at, and the environment that points it there."""

    store: Store
    env: dict[str, str]


@pytest.fixture(params=["redis", "sqlite"])
def target(
    request: pytest.FixtureRequest, redis_url: str, key_prefix: str, tmp_path: Path
) -> Iterator[Target]:
    url = redis_url if request.param == "redis" else f"sqlite:///{tmp_path}/store.sqlite"
    store = open_store(url, key_prefix)
    yield Target(store, {"HASHBEAT_TEST_STORE_URL": url, "HASHBEAT_TEST_PREFIX": key_prefix})
    store.close()


def hashbeat(run: Run, target: Target, *args: str) -> subprocess.CompletedProcess[str]:
    return run("hashbeat", *args, "-A", APP, env=target.env)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    assert not done.stderr, done.stderr
    return done.stdout


def next_slots(expr: str, tz: str, after: datetime, count: int = 10) -> list[str]:
    """The next slots of ``expr`` for entry NAME, by the engine alone, as --json writes them."""
    slots, moment = [], after
    engine = parse(expr, key=NAME, tz=tz)
    for _ in range(count):
        moment = engine.next(moment)
        slots.append(moment.astimezone(timezone.utc).isoformat(timespec="milliseconds"))
    return slots


def test_an_entry_through_its_life(run: Run, target: Target) -> None:
    store = target.store
    before = datetime.now(timezone.utc)
    out = ok(
        hashbeat(
            run,
            target,
            "add",
            NAME,
            "--task",
            TASK,
            "--cron",
            "H 6 * * *",
            "--tz",
            "Europe/Riga",
            "--args",
            "[42]",
            "--kwargs",
            '{"full": true}',
            "--queue",
            "reports",
            "--overlap",
            "skip",
            "--max-runs",
            "5",
        )
    )
    assert out.startswith(f"added {NAME!r}: next slot ")
    ok(hashbeat(run, target, "pause", NAME, "--reason", "supplier outage"))

    listed = {e["name"]: e for e in json.loads(ok(hashbeat(run, target, "entries", "--json")))}
    entry = listed[NAME]
    assert entry["source"] == "store" and listed["refresh-prices"]["source"] == "config"
    assert entry["definition"] == {
        "task": TASK,
        "schedule": {"hashcron": "H 6 * * *", "tz": "Europe/Riga"},
        "args": [42],
        "kwargs": {"full": True},
        "options": {"queue": "reports"},
        "overlap": "skip",
        "max_runs": 5,
    }
    assert entry["paused"]["reason"] == "supplier outage"
    # Paused: the leader sends none of its slots, so none is shown.
    assert entry["next_slots"] == []
    assert listed["refresh-prices"]["paused"] is None

    table = ok(hashbeat(run, target, "entries")).splitlines()
    assert table[0].split()[:4] == ["NAME", "SOURCE", "SCHEDULE", "PAUSED"]
    row = next(line for line in table if line.startswith(f"{NAME} "))
    assert "store" in row and "H 6 * * * (Europe/Riga)" in row
    assert "yes (supplier outage)" in row

    text = ok(hashbeat(run, target, "show", NAME))
    assert f"entry       {NAME}  (store)" in text and "schedule    H 6 * * * (Europe/Riga)" in text
    assert "paused      since " in text and ": supplier outage" in text
    # Who paused it: the OS user and host, as the audit trail names them.
    by = f"{getpass.getuser()}@{socket.gethostname()}"
    assert f" by {by}: supplier outage" in text
    shown = json.loads(ok(hashbeat(run, target, "show", NAME, "--json")))
    assert shown["paused"]["by"] == by
    assert shown["definition"] == entry["definition"] and shown["history"] == []
    assert shown["next_slots"] == entry["next_slots"]
    assert "next slots  none while paused" in text

    ok(hashbeat(run, target, "resume", NAME))
    pause = store.changes(0).records[NAME][1]
    assert pause is not None and json.loads(pause)["paused"] is False
    resumed = json.loads(ok(hashbeat(run, target, "show", NAME, "--json")))
    # max_runs 5: the leader sends five slots, so five are shown.
    assert resumed["next_slots"] == next_slots("H 6 * * *", "Europe/Riga", before, count=5)

    task_id = ok(hashbeat(run, target, "trigger", NAME)).splitlines()[0]
    assert str(uuid.UUID(task_id)) == task_id
    triggers = [json.loads(text) for text in store.triggers()]
    assert [(t["entry"], t["id"]) for t in triggers] == [(NAME, task_id)]

    ok(hashbeat(run, target, "update", NAME, "--cron", "H 7 * * *", "--unset", "max_runs"))
    definition = json.loads(store.changes(0).records[NAME][0] or "")
    assert definition["schedule"] == {"hashcron": "H 7 * * *", "tz": "Europe/Riga"}
    assert "max_runs" not in definition and definition["args"] == [42]

    assert ok(hashbeat(run, target, "remove", NAME)) == f"removed {NAME!r}\n"
    assert store.changes(0).records[NAME] == (None, None)


def test_bad_input_is_one_line_with_its_exit_code_and_changes_nothing(
    run: Run, invoke: Callable[..., Result], app_store: Store
) -> None:
    """The refusals run in this process (the same click commands; a subprocess each would
    cost a second apiece); the first add and the unreachable store run as real processes."""
    store = app_store
    target = Target(store, {})
    ok(hashbeat(run, target, "add", NAME, "--task", TASK, "--interval", "300"))
    add = ["add", "new-entry", "--task", TASK]
    cases: list[tuple[list[str], int, str]] = [
        ([*add, "--every", "60", "--args", "[1"], Exit.USAGE, "--args: not JSON"),
        ([*add, "--every", "60", "--kwargs", "[1]"], Exit.USAGE, "give a JSON object"),
        ([*add, "--cron", "61 * * * *"], Exit.USAGE, "minute value 61 is out of range"),
        ([*add, "--cron", "H * * * *", "--tz", "Mars/Olympus"], Exit.USAGE, "unknown time zone"),
        (["add", "x", "--task", "proj.nope", "--every", "9"], Exit.USAGE, "is not registered"),
        (["add", "refresh-prices", "--task", TASK, "--every", "9"], Exit.USAGE, "beat_schedule"),
        ([*add, "--every", "9", "--overlap", "never"], Exit.USAGE, "overlap must be one of"),
        # What every beat would refuse is refused before it is stored (one build path).
        ([*add, "--every", "9", "--workers", "web-1"], Exit.USAGE, "not a worker node name"),
        ([*add, "--every", "9", "--workers", "*", "--queue", "q"], Exit.USAGE, "cannot apply"),
        (
            [*add, "--every", "9", "--workers", "celery@a,celery@a"],
            Exit.USAGE,
            "more than once",
        ),
        (
            [*add, "--every", "9", "--overlap", "buffer_one", "--catch-up", "all"],
            Exit.USAGE,
            "buffer_one",
        ),
        (
            [
                *add,
                "--every",
                "9",
                "--start",
                "2027-01-01T00:00+00:00",
                "--end",
                "2026-01-01T00:00Z",
            ],
            Exit.USAGE,
            "must come before 'end'",
        ),
        ([*add, "--every", "9", "--start", "2027-01-01"], Exit.USAGE, "with no time zone"),
        (["add", NAME, "--task", TASK, "--every", "9"], Exit.USAGE, "in the store already"),
        (["update", NAME, "--cron", "H 25 * * *"], Exit.USAGE, "hour value 25"),
        (["remove", "refresh-prices"], Exit.USAGE, "edit the configuration"),
        (["pause", "no-such-entry"], Exit.SETUP, "`hashbeat entries` lists them"),
        (["trigger", "no-such-entry"], Exit.SETUP, "no entry 'no-such-entry'"),
        (["update", "no-such-entry", "--every", "9"], Exit.SETUP, "no entry 'no-such-entry'"),
    ]
    assert Exit.SETUP == 3  # UnknownEntryError.exit_code, which the docs call "no such entry"
    before = (store.changes(0), store.triggers())
    for args, code, words in cases:
        result = invoke(*args, "-A", APP)
        assert result.exit_code == code, (args, result.stderr)
        assert result.stderr.startswith("Error: ") and words in result.stderr, (args, result.stderr)
        assert len(result.stderr.splitlines()) == 1 and not result.stdout, (args, result.stderr)
    assert (store.changes(0), store.triggers()) == before

    unreachable = Target(store, {"HASHBEAT_TEST_STORE_URL": "redis://127.0.0.1:1/0"})
    done = hashbeat(run, unreachable, *add, "--every", "0")
    assert done.returncode == Exit.USAGE, done.stderr  # bad input is refused before the store
    done = hashbeat(run, unreachable, "pause", NAME)
    assert done.returncode == Exit.STORE and "not answering" in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_malformed_stored_entry_is_listed_as_unreadable(run: Run, store: Store) -> None:
    store.edit("by-hand", {"definition": '{"task": "t"}'})
    listed = json.loads(ok(hashbeat(run, Target(store, {}), "entries", "--json")))
    entry = next(e for e in listed if e["name"] == "by-hand")
    assert entry["source"] == "store" and entry["next_slots"] == []
    assert "needs 'task' and 'schedule'" in entry["definition"]["unreadable"]
    table = ok(hashbeat(run, Target(store, {}), "entries")).splitlines()
    assert next(line for line in table if line.startswith("by-hand ")).split()[1:4] == [
        "store",
        "unreadable",
        "(hashbeat",
    ]


def test_the_docs_acl_users_let_operators_change_and_only_beats_lead(
    run: Run, private_redis: RedisProcess
) -> None:
    """docs/runtime.md's two ``ACL SETUSER`` lines, as written: an operator runs every command
    the page says it may; it cannot take the lease or the triggers, which the beat's user can."""
    text = (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.startswith("ACL SETUSER ")]
    assert [line.split()[2] for line in lines] == ["beat", "operator"]
    admin = redis.Redis.from_url(private_redis.url)
    for line in lines:
        admin.execute_command(*line.split())
    admin.close()
    urls = {
        user: private_redis.url.replace("redis://", f"redis://{user}:{secret}@", 1)
        for user, secret in (("beat", "beat-secret"), ("operator", "op-secret"))
    }
    operator = Target(
        open_store(urls["operator"], "hashbeat"),
        {"HASHBEAT_TEST_STORE_URL": urls["operator"], "HASHBEAT_TEST_PREFIX": "hashbeat"},
    )
    ok(hashbeat(run, operator, "add", NAME, "--task", TASK, "--interval", "60"))
    ok(hashbeat(run, operator, "pause", "refresh-prices", "--reason", "acl"))
    task_id = ok(hashbeat(run, operator, "trigger", NAME)).splitlines()[0]
    for command in (["update", NAME, "--max-runs", "3"], ["resume", "refresh-prices"]):
        ok(hashbeat(run, operator, *command))
    for command in (["entries"], ["show", NAME], ["status"]):
        ok(hashbeat(run, operator, *command))
    with pytest.raises(StoreAuthError):
        operator.store.acquire("operator:1:x", 10_000)
    with pytest.raises(StoreAuthError):
        operator.store.take_triggers("operator:1:x")
    operator.store.close()
    beat = open_store(urls["beat"], "hashbeat")
    assert beat.acquire("beat:1:x", 10_000)
    assert [json.loads(t)["id"] for t in beat.take_triggers("beat:1:x")] == [task_id]
    beat.close()
    assert ok(hashbeat(run, operator, "remove", NAME)) == f"removed {NAME!r}\n"


def test_a_plain_intervals_next_slots_count_from_its_last_sent_slot(run: Run, store: Store) -> None:
    """As the leader counts them: a slot sent after the add is where the chain goes on."""
    target = Target(store, {})
    ok(hashbeat(run, target, "add", "poll", "--task", TASK, "--every", "60"))
    assert store.acquire("host:1:a", 10_000)
    sent = int(datetime.now(timezone.utc).timestamp() * 1000) + 1_234
    stored = decode("poll", cast(str, store.controls_of("poll")[0])).definition
    settings = Settings.from_conf(proj.app.conf, warn=False)
    # Fenced for this schedule (a fence of another schedule is anchored afresh, as a leader does).
    fingerprint = Catalog.trial(proj.app, settings, sent, "poll", stored).fingerprint
    assert store.claim("host:1:a", {"poll": (sent, fingerprint)}) == {"poll"}
    shown = json.loads(ok(hashbeat(run, target, "show", "poll", "--json")))
    expected = [sent + 60_000 * n for n in range(1, 11)]
    assert shown["next_slots"] == [
        datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")
        for ms in expected
    ]
