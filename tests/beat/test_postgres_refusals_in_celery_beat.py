"""``celery beat`` on a PostgreSQL store it cannot use: a wrong password or an unknown database
is one ERROR line naming the fix (the password hidden, no traceback), and the beat keeps running
and sends nothing, as with a Redis that refuses it (docs/settings.md, "PostgreSQL")."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.postgres import PASSWORD, PostgresServer
from tests.support.processes import ProcessGroup, celery_beat_args, wait_until

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("wrong", "words"),
    [("password", "password authentication failed"), ("database", "does not exist")],
)
def test_a_refused_store_is_one_line_in_the_beats_log(
    tmp_path: Path, postgres_server: PostgresServer, postgres_url: str, wrong: str, words: str
) -> None:
    url = (
        postgres_url.replace(PASSWORD, "not-the-pw-93")
        if wrong == "password"
        else postgres_server.url("no_such_db")
    )
    env = {
        "HASHBEAT_CHAOS_STORE": url,
        "HASHBEAT_CHAOS_BROKER": "memory://",
        "HASHBEAT_CHAOS_PREFIX": "refused",
    }
    with ProcessGroup(tmp_path) as group:
        beat = group.start("beat", celery_beat_args("tests.chaos.app", tmp_path, "beat"), env)
        assert wait_until(lambda: words in beat.log.read_text(), timeout=30), beat.log_tail()
        time.sleep(1)
        assert beat.alive, beat.log_tail()
        beat.terminate()
        assert beat.wait(10) == 0, beat.log_tail()
    text = beat.log.read_text()
    lines = [line for line in text.splitlines() if words in line]
    assert len(lines) == 1, text  # logged once, not once per retry
    assert "ERROR" in lines[0] and "PostgreSQL store" in lines[0]
    assert "Traceback" not in text and "not-the-pw-93" not in text
