"""A configuration mistake under ``celery beat`` (a real subprocess) ends it with one line that
names the setting and says what to write: no traceback, no flood of log records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tests.support.processes import ROOT, wait_until

pytestmark = pytest.mark.slow


def beat(
    config: dict[str, Any],
    *args: str,
    timeout: float = 20,
    django: bool = False,
    until: str | None = None,
    app: str = "tests.beat.config_app",
    extra: dict[str, str] | None = None,
) -> tuple[int | None, str]:
    """Run ``celery beat`` on the config app (or ``app``, with ``extra`` in its environment);
    its exit code (None if still running after ``timeout`` seconds, or once it printed
    ``until``, then stopped) and everything it printed."""
    env = {**os.environ, "HASHBEAT_CONFIG": json.dumps(config), "PYTHONPATH": str(ROOT)}
    env.update(extra or {})
    if django:
        env["HASHBEAT_DJANGO"] = "1"
    command = [
        sys.executable, "-m", "celery", "-A", app, "beat",
        "-S", "celery_hashbeat.Scheduler", "--loglevel=INFO", *args,
    ]  # fmt: skip
    with (
        tempfile.TemporaryFile("w+") as log,
        subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
        ) as process,
    ):

        def printed() -> str:
            log.seek(0)
            return log.read()

        def over() -> bool:
            return process.poll() is not None or (until is not None and until in printed())

        wait_until(over, timeout, 0.05)
        code = process.poll()
        if code is None:
            process.terminate()
            process.wait(10)
        return code, printed()


#: What a beat logs once it leads: by then everything it says at start is said.
LEADING = "enqueueing from now on"


BANNER = ("celery beat v", "__    -", "LocalTime -> ", "Configuration ->", "    . ")
STARTING = "beat: Starting..."


def error_lines(output: str) -> list[str]:
    """What beat printed besides Celery's start banner and its "Starting" line (printed when the
    mistake is found once the store is opened)."""
    return [
        line
        for line in output.splitlines()
        if line.strip() and not line.startswith(BANNER) and not line.endswith(STARTING)
    ]


@pytest.mark.parametrize(
    ("config", "named", "fix"),
    [
        ({"hashbeat_catch_up": "newest"}, "hashbeat_catch_up", "'latest', 'all', 'skip'"),
        ({"hashbeat_lease_ttl": -1}, "hashbeat_lease_ttl", "positive number of seconds"),
        (
            {"hashbeat_lease_ttl": 5, "hashbeat_lease_renew_interval": 2},
            "hashbeat_lease_ttl (5s)",
            "raise hashbeat_lease_ttl to 6 or more",
        ),
        ({"hashbeat_catch_up_window": "1h"}, "hashbeat_catch_up_window", "e.g. 3600"),
        ({"hashbeat_key_prefix": "{app}"}, "hashbeat_key_prefix", "without braces"),
        ({"hashbeat_store_url": 6379}, "hashbeat_store_url", "redis://host:6379/0"),
        ({"hashbeat_store_options": {"bogus": 1}}, "bogus", "use timeout"),
        ({"hashbeat_store_options": "fast"}, "hashbeat_store_options", "must be a dict"),
        ({"hashbeat_redis_use_ssl": True}, "hashbeat_redis_use_ssl", "must be a dict"),
        ({"hashbeat_store_url": "sqlite:////no/such/dir/x.sqlite"}, "/no/such/dir", "create it"),
        ({"hashbeat_store_url": "mongodb://x"}, "hashbeat_store_url", "redis://"),
        ({"hashbeat_store_url": "redis://127.0.0.1:1/zero"}, "hashbeat_store_url", "/0, /1"),
        (
            {"hashbeat_store_url": "redis://127.0.0.1:1/0?ssl_ca_certs=/ca.pem"},
            "ssl_ca_certs need TLS",
            "use rediss://",
        ),
        (
            {"hashbeat_store_url": "redis+sentinel://127.0.0.1:1/0"},
            "Sentinel needs a master name",
            "add ?master_name=",
        ),
    ],
)
def test_a_mistake_ends_beat_with_one_clear_line(
    config: dict[str, Any], named: str, fix: str, tmp_path: Path
) -> None:
    config.setdefault("hashbeat_store_url", f"sqlite:///{tmp_path}/store.sqlite")
    started = time.monotonic()
    code, output = beat(config)
    assert time.monotonic() - started < 15, "beat took too long to give up"
    assert code not in (0, None), output
    assert "Traceback" not in output, output
    lines = error_lines(output)
    assert len(lines) == 1, lines
    assert "celery_hashbeat: " in lines[0] and named in lines[0] and fix in lines[0], lines[0]


def test_a_mistake_in_django_settings_ends_beat_with_one_clear_line(tmp_path: Path) -> None:
    config = {
        "CELERY_HASHBEAT_STORE_URL": f"sqlite:///{tmp_path}/store.sqlite",
        "CELERY_HASHBEAT_CATCH_UP": "newest",
    }
    code, output = beat(config, django=True)
    assert code not in (0, None) and "Traceback" not in output, output
    assert error_lines(output) == [
        "celery_hashbeat: CELERY_HASHBEAT_CATCH_UP must be one of 'latest', 'all', 'skip', "
        "not 'newest'"
    ]


def test_a_store_option_mistake_in_django_settings_is_an_error_in_django_spelling(
    tmp_path: Path,
) -> None:
    """Found once the store is opened, after Celery has taken stderr into its log: the line is
    logged at ERROR (not as the WARNING a write to the redirected stderr becomes), and beat
    exits 1."""
    config = {
        "CELERY_HASHBEAT_STORE_URL": f"sqlite:///{tmp_path}/store.sqlite",
        "CELERY_HASHBEAT_STORE_OPTIONS": {"bogus": 1},
    }
    code, output = beat(config, django=True)
    assert code == 1 and "Traceback" not in output, output
    (line,) = error_lines(output)
    assert "ERROR/MainProcess] celery_hashbeat: CELERY_HASHBEAT_STORE_URL=" in line, line
    assert "unknown option(s) bogus" in line and "hashbeat_" not in line, line


def test_a_bad_entry_is_skipped_by_name_and_the_others_run(tmp_path: Path) -> None:
    config = {
        "hashbeat_store_url": f"sqlite:///{tmp_path}/store.sqlite",
        "beat_schedule": {
            "bad": {"task": "t.bad", "schedule": 1.0, "catchup": "all"},
            "good": {"task": "t.good", "schedule": 1.0},
        },
    }
    code, output = beat(config, timeout=8, until="Sending due task good")
    assert code is None, output  # still running: the mistake is the entry's, not beat's
    assert "Traceback" not in output, output
    skipped = [line for line in output.splitlines() if "skipping" in line]
    assert len(skipped) == 1 and "'bad'" in skipped[0] and "catchup" in skipped[0], output
    assert "Sending due task good (t.good)" in output, output


def one_shot_beat(
    store: str, instant: datetime, until: str, timeout: float = 15
) -> tuple[int | None, str]:
    """``celery beat`` on tests/beat/oneshot_app.py: its ``once`` entry at ``instant``, the
    catch-up ``skip``, beside an entry due every second."""
    config = {"hashbeat_store_url": store, "hashbeat_catch_up": "skip"}
    extra = {"HASHBEAT_AT": instant.isoformat(), "HASHBEAT_EXCLUDE": "2020-01-01"}
    return beat(config, timeout=timeout, until=until, app="tests.beat.oneshot_app", extra=extra)


def test_a_past_one_shot_that_its_catch_up_would_never_send_is_refused_by_name(
    tmp_path: Path,
) -> None:
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    code, output = one_shot_beat(f"sqlite:///{tmp_path}/store.sqlite", past, "shop.tick")
    assert code is None, output  # still running: the mistake is the entry's, not beat's
    assert "Traceback" not in output, output
    refused = [line for line in output.splitlines() if "'once'" in line]
    assert len(refused) == 1, output
    assert "ERROR" in refused[0] and "has passed" in refused[0], refused
    assert "give a later instant" in refused[0] and "catch_up 'latest'" in refused[0], refused
    assert "Sending due task ticks (shop.tick)" in output, output


def test_a_one_shot_done_before_a_restart_is_not_refused_after_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/store.sqlite"
    # Far enough ahead that a beat slow to start on a busy machine still reads it as to come.
    instant = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=10)
    code, output = one_shot_beat(store, instant, "Sending due task once", timeout=30)
    assert "Sending due task once (shop.once)" in output, output
    wait_until(lambda: datetime.now(timezone.utc) > instant + timedelta(seconds=1), 5, 0.1)
    code, output = one_shot_beat(store, instant, "Sending due task ticks")
    assert code is None and "Traceback" not in output, output
    assert "shop.once" not in output, output
    assert not [line for line in output.splitlines() if "ERROR" in line], output


def warnings_about(name: str, output: str) -> list[str]:
    return [line for line in output.splitlines() if name in line]


def test_a_mistyped_setting_is_named_once_with_the_closest_one(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/store.sqlite"
    _, output = beat(
        {"hashbeat_store_url": store, "hashbeat_lease_tll": 3}, timeout=6, until=LEADING
    )
    warnings = warnings_about("hashbeat_lease_tll", output)
    assert len(warnings) == 1, output
    # Logged through Celery's logging (so --logfile and --loglevel apply), not before it.
    assert "WARNING/MainProcess] celery_hashbeat: setting hashbeat_lease_tll " in warnings[0]
    assert warnings[0].endswith("did you mean hashbeat_lease_ttl?")


def test_a_mistyped_django_setting_is_named_in_the_django_spelling(tmp_path: Path) -> None:
    config = {
        "CELERY_HASHBEAT_STORE_URL": f"sqlite:///{tmp_path}/store.sqlite",
        "CELERY_HASHBEAT_LEASE_TLL": 3,
    }
    _, output = beat(config, timeout=6, django=True, until=LEADING)
    warnings = warnings_about("CELERY_HASHBEAT_LEASE_TLL", output)
    assert len(warnings) == 1, output
    assert warnings[0].endswith("did you mean CELERY_HASHBEAT_LEASE_TTL?")


def test_a_schedule_file_is_said_to_be_unused(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/store.sqlite"
    _, output = beat(
        {"hashbeat_store_url": store}, f"--schedule={tmp_path}/beat.db", timeout=6, until=LEADING
    )
    notes = warnings_about("is not used", output)
    assert len(notes) == 1 and f"{tmp_path}/beat.db" in notes[0], output
    assert f"({store})" in notes[0], notes[0]
    assert not (tmp_path / "beat.db").exists()


def test_no_word_about_the_schedule_file_when_none_was_given(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/store.sqlite"
    _, output = beat({"hashbeat_store_url": store}, timeout=6, until=LEADING)
    assert LEADING in output, output
    assert warnings_about("is not used", output) == [], output


@pytest.mark.parametrize(
    "config",
    [
        {"hashbeat_catch_up": "newest"},
        {"hashbeat_store_options": {"bogus": 1}},
        {"hashbeat_store_url": "sqlite:////no/such/dir/x.sqlite"},
    ],
)
def test_hashbeat_commands_report_the_same_line(config: dict[str, Any], tmp_path: Path) -> None:
    """``hashbeat status`` on the same app says what beat says, as its one ``Error:`` line."""
    config.setdefault("hashbeat_store_url", f"sqlite:///{tmp_path}/store.sqlite")
    _, beat_output = beat(config)
    env = {**os.environ, "HASHBEAT_CONFIG": json.dumps(config), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [Path(sys.executable).with_name("hashbeat"), "status", "-A", "tests.beat.config_app"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    (line,) = done.stderr.strip().splitlines()
    (beat_line,) = error_lines(beat_output)
    assert line.removeprefix("Error: ") == beat_line.partition("celery_hashbeat: ")[2]
