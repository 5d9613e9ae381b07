"""Commands that read the app and the store, run in this process through click's runner."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from celery_hashbeat import hashcron, parse
from celery_hashbeat.cli import main
from celery_hashbeat.cli.output import Exit
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.settings import Settings
from celery_hashbeat.store import Store
from tests.cli import proj
from tests.cli.conftest import APP
from tests.support.redis_server import RedisProcess

Invoke = Callable[..., Result]


def fingerprint(name: str) -> str:
    """The schedule's fingerprint with which a beat fences the test app's entry ``name`` (a
    fence of another schedule is anchored afresh, as a changed schedule is)."""
    settings = Settings.from_conf(proj.app.conf, warn=False)
    definition = proj.app.conf.beat_schedule[name]
    return Catalog.trial(proj.app, settings, 0, name, definition).fingerprint


def test_schedule_lists_every_entry_resolved(invoke: Invoke, app_store: Store) -> None:
    token = "host:1:test"
    assert app_store.acquire(token, 10_000)
    last = (int(time.time()) // 3600 - 1) * 3600 * 1000
    app_store.claim(token, {"cleanup": (last, "fp")})
    result = invoke("schedule", "-A", APP, "--json")
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["entries"]}
    assert set(rows) == {
        "refresh-prices", "nightly-report", "poll-feeds", "riga-morning", "sync", "cleanup",
        "heartbeat", "sunset", "added-hourly", "celery.backend_cleanup",
    }  # fmt: skip
    for name in ("refresh-prices", "nightly-report", "poll-feeds"):
        assert rows[name]["kind"] == "hashcron"
        assert rows[name]["key"] == name
    assert rows["refresh-prices"]["resolved"] == str(parse("H * * * *", "refresh-prices"))
    riga = parse("H(0-29) 9 * * 1-5", "riga-morning", tz="Europe/Riga")
    assert rows["riga-morning"]["resolved"] == str(riga)
    assert rows["riga-morning"]["zone"] == "Europe/Riga"
    now = json.loads(result.stdout)["now_ms"]
    assert rows["riga-morning"]["next_ms"] == riga.next_timestamp(now / 1000) * 1000
    assert rows["cleanup"]["kind"] == "crontab"
    assert rows["cleanup"]["expression"] == "0 4 * * *"
    assert rows["cleanup"]["last_ms"] == last
    assert rows["sync"]["kind"] == "hashinterval"
    assert rows["added-hourly"]["kind"] == "interval"
    assert all(row["error"] is None for row in rows.values())


def test_schedule_table(invoke: Invoke, app_store: Store) -> None:
    result = invoke("schedule", "-A", APP)
    assert result.exit_code == 0, result.output
    header, *lines = result.stdout.splitlines()
    assert header.split() == [
        "NAME", "TASK", "KIND", "EXPRESSION", "RESOLVED", "KEY", "ZONE", "NEXT", "RUN", "LAST",
        "ENQUEUED",
    ]  # fmt: skip
    assert len(lines) == 10  # beat_schedule's nine and Celery's celery.backend_cleanup
    assert any(line.startswith("poll-feeds") and "never" in line for line in lines)


def test_schedule_store_unreachable(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(proj.app.conf, "hashbeat_store_url", "redis://127.0.0.1:1/0")
    result = invoke("schedule", "-A", APP)
    assert result.exit_code == Exit.STORE
    assert "not answering" in result.stderr
    assert "refresh-prices" in result.stdout  # the table still shows, without last slots
    assert invoke("schedule", "-A", APP, "--no-store").exit_code == 0


def test_status_check_follows_the_lease(invoke: Invoke, app_store: Store) -> None:
    result = invoke("status", "-A", APP, "--check")
    assert result.exit_code == Exit.FINDINGS
    assert "no beat holds the lease" in result.stderr
    token = "host:42:abc"
    assert app_store.acquire(token, 30_000)
    app_store.heartbeat(token, "leader", 30_000)
    app_store.claim(token, {"refresh-prices": (1_700_000_000_000, "fp")})
    result = invoke("status", "-A", APP, "--check")
    assert result.exit_code == 0, result.output
    assert f"leader    {token}" in result.stdout
    assert "refresh-prices" in result.stdout
    shown = json.loads(invoke("status", "-A", APP, "--json").stdout)
    assert shown["leader"]["token"] == token
    assert 0 < shown["leader"]["lease_left_ms"] <= 30_000
    assert [beat["role"] for beat in shown["beats"]] == ["leader"]
    assert shown["beats"][0]["last_seen"].endswith("+00:00")  # an instant, plainly
    assert 0 <= shown["beats"][0]["seen_ms_ago"] < 30_000  # and a duration, named as one
    assert shown["last_slots"] == {"refresh-prices": 1_700_000_000_000}
    app_store.release(token)
    assert invoke("status", "-A", APP, "--check").exit_code == Exit.FINDINGS


def test_status_names_the_leader_by_the_lease_not_by_a_heartbeat(
    invoke: Invoke, app_store: Store
) -> None:
    """A beat that died while leading still has a heartbeat saying "leader" until it expires;
    the lease, held by another beat now, is what decides."""
    app_store.heartbeat("host:1:gone", "leader", 30_000)
    assert app_store.acquire("host:2:new", 30_000)
    app_store.heartbeat("host:2:new", "leader", 30_000)
    roles = {
        b["token"]: b["role"]
        for b in json.loads(invoke("status", "-A", APP, "--json").stdout)["beats"]
    }
    assert roles == {"host:1:gone": "not leading (holds no lease)", "host:2:new": "leader"}


def test_status_after_a_clean_stop_names_no_leader(invoke: Invoke, app_store: Store) -> None:
    """A beat that released the lease on a clean stop may still have a live heartbeat saying
    "leader" (until it expires, or until the store drops it on release): nobody leads."""
    token = "host:4:stopped"
    assert app_store.acquire(token, 30_000)
    app_store.heartbeat(token, "leader", 30_000)
    assert app_store.release(token)
    result = invoke("status", "-A", APP)
    assert "leader    none: no beat holds the lease" in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith(f"  {token}")]
    assert all(row[1] != "leader" for row in rows), result.stdout
    shown = json.loads(invoke("status", "-A", APP, "--json").stdout)
    assert shown["leader"] is None
    assert all(beat["role"] != "leader" for beat in shown["beats"])


def test_schedule_shows_the_last_enqueued_slot_as_past(invoke: Invoke, app_store: Store) -> None:
    token = "host:3:x"
    assert app_store.acquire(token, 30_000)
    missed = int(time.time() * 1000) - 90_000
    app_store.claim(token, {"poll-feeds": (missed, fingerprint("poll-feeds"))})
    [line] = [
        line
        for line in invoke("schedule", "-A", APP).stdout.splitlines()
        if line.startswith("poll-feeds")
    ]
    next_run, last = line.rsplit("(", 2)[1:]
    assert "due now, catching up" in next_run, line  # the missed slot, owed under NEXT RUN
    assert "ago" in last and "due now" not in last, line


def test_status_by_url(invoke: Invoke, redis_url: str, key_prefix: str, store: Store) -> None:
    assert store.acquire("t:1:x", 5000)
    result = invoke("status", "--store", redis_url, "--prefix", key_prefix, "--check")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["status", "--store", "redis://127.0.0.1:1/0"], Exit.STORE, "not answering"),
        (["status", "--store", "mongodb://x"], Exit.SETUP, "no known store"),
        (["status", "-A", "nosuch"], Exit.SETUP, "there is no module 'nosuch'"),
        (["schedule", "-A", "tests.cli.nosuch"], Exit.SETUP, "no module 'tests.cli.nosuch'"),
        (["schedule", "-A", "tests.cli.proj:nothing"], Exit.SETUP, "cannot load the app"),
        (["schedule"], Exit.USAGE, "needs the Celery app"),
        (["status"], Exit.USAGE, "--store URL"),
    ],
)
def test_errors_are_one_line(invoke: Invoke, args: list[str], code: Exit, message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert isinstance(result.exception, SystemExit)


def test_wrong_password() -> None:
    with RedisProcess(password="right") as server:
        url = server.url.replace(":right@", ":wrong@")
        result = CliRunner().invoke(main, ["status", "--store", url])
    assert result.exit_code == Exit.STORE, result.output
    assert "refused the credentials" in result.stderr
    assert "wrong" not in result.stderr  # the password is masked


def test_lint_app(invoke: Invoke) -> None:
    result = invoke("lint", "-A", APP, "--json")
    assert result.exit_code == Exit.FINDINGS, result.output
    results = {r["entry"]: r for r in json.loads(result.stdout)["results"]}
    assert results["cleanup"]["kind"] == "crontab"
    assert [w["code"] for w in results["cleanup"]["warnings"]] == ["literal-minute"]
    assert results["cleanup"]["warnings"][0]["suggestion"] == "H 4 * * *"
    assert results["refresh-prices"]["warnings"] == []
    assert "heartbeat" not in results  # intervals have no expression to lint


def test_spread_app(invoke: Invoke) -> None:
    result = invoke("spread", "-A", APP, "--date", "2026-03-09", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["what"] == "10 entries"  # celery.backend_cleanup too
    assert shown["bucket_seconds"] == 1  # poll-feeds has a seconds field
    assert shown["hashed"]["total"] == shown["plain"]["total"]
    assert shown["plain"]["peak"] > shown["hashed"]["peak"]


def test_an_entry_that_cannot_run(invoke: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = {"task": "proj.x", "schedule": hashcron("61 * * * *")}
    monkeypatch.setitem(proj.app.conf.beat_schedule, "broken", broken)
    result = invoke("schedule", "-A", APP, "--no-store")
    assert result.exit_code == Exit.SETUP
    assert "cannot run: entry 'broken': minute value 61 is out of range 0-59" in result.stdout
    assert "refresh-prices" in result.stdout
    assert "entries that cannot run: broken" in result.stderr
    result = invoke("spread", "-A", APP)
    assert result.exit_code == Exit.SETUP
    assert "entry 'broken'" in result.stderr
    result = invoke("lint", "-A", APP)
    assert result.exit_code == Exit.SETUP
    assert "out of range" in result.stdout
