"""Redis key names are spelled once, in store/redis/keys.py, and never change: data written by
earlier releases is read under them."""

from __future__ import annotations

import re
from pathlib import Path

import celery_hashbeat
from celery_hashbeat.store.redis.keys import Keys

PACKAGE = Path(celery_hashbeat.__file__).parent


def test_the_key_names_are_those_existing_data_uses() -> None:
    keys = Keys("app")
    assert [keys.leader, keys.fired, keys.runs, keys.beats] == [
        "{app}:leader",
        "{app}:fired",
        "{app}:runs",
        "{app}:beats",
    ]
    assert [keys.defs, keys.paused, keys.version, keys.changes, keys.triggers] == [
        "{app}:defs",
        "{app}:paused",
        "{app}:version",
        "{app}:changes",
        "{app}:triggers",
    ]
    assert keys.running("nightly") == keys.running_prefix + "nightly" == "{app}:running:nightly"
    assert keys.history("nightly") == keys.history_prefix + "nightly" == "{app}:history:nightly"
    assert keys.shared("roster") == "{app}:roster"
    assert keys.shared("balance") == "{app}:balance"


def test_no_other_module_builds_a_hash_tagged_key() -> None:
    """A key is built where a hash tag ``{<prefix>}`` is written: only keys.py writes one."""
    tag = re.compile(r"\{\{\{|\"\{\"\s*\+")
    builders = [
        path.relative_to(PACKAGE).as_posix()
        for path in sorted(PACKAGE.rglob("*.py"))
        if tag.search(path.read_text())
    ]
    assert builders == ["store/redis/keys.py"]
