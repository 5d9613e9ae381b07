"""Records of things that are gone have a bounded life (docs/operations.md, "What the store keeps
and for how long"), against both stores: the history of a forgotten entry (removed, or the copy
of a worker that left) and the mark of a removed name in the runtime controls go after
``retention.GONE_TTL_MS``; every history lives at most ``retention.HISTORY_TTL_MS`` after its
last record; what still runs keeps working. The bound is shortened here, as a clock would be."""

from __future__ import annotations

import time

import pytest
import redis

from celery_hashbeat.store import Store, retention
from tests.store.conftest import Backend

LONG = 60_000
#: The shortened life of what is gone, in ms.
GONE_MS = 300


@pytest.fixture
def short_life(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retention, "GONE_TTL_MS", GONE_MS)


def test_a_forgotten_entrys_history_goes_and_a_live_ones_stays(
    store: Store, short_life: None
) -> None:
    assert store.acquire("a", LONG)
    store.record([("gone", "1"), ("gone@w1", "1"), ("live", "1")])
    assert store.forget("a", ["gone", "gone@w1"])
    time.sleep(GONE_MS * 2 / 1000)
    store.record([("live", "2")])
    assert store.history("gone") == []
    assert store.history("gone@w1") == []
    assert store.history("live") == ["2", "1"]


def test_a_late_record_of_a_forgotten_entry_does_not_revive_its_history(
    store: Store, short_life: None
) -> None:
    """A copy's task that ends after its worker left, or a beat's outcome sent after the entry's
    removal, still records; the history still goes when the forgotten entry's would."""
    assert store.acquire("a", LONG)
    store.record([("late", "1")])
    assert store.forget("a", ["late"])
    store.record([("late", "2")])
    assert store.history("late") == ["2", "1"]
    time.sleep(GONE_MS * 2 / 1000)
    assert store.history("late") == []
    store.record([("late", "3")])  # a record after that starts a history afresh
    assert store.history("late") == ["3"]


def test_a_removed_names_mark_goes_and_a_reader_that_missed_it_reads_everything(
    store: Store, short_life: None
) -> None:
    store.edit("x", {"definition": "{}"})
    removed = store.edit("x", {"definition": None})
    assert removed is not None
    assert store.changes(removed - 1).records == {"x": (None, None)}  # a beat still learns it
    time.sleep(GONE_MS * 2 / 1000)
    kept = store.edit("y", {"definition": "{}"})  # a later change drops the old mark
    assert kept is not None
    assert store.changes(0).records == {"y": ("{}", None)}
    stale = store.changes(removed - 1)  # it never saw x go: it must read everything
    assert stale.full and stale.records == {"y": ("{}", None)}
    current = store.changes(removed)  # it saw x go: only what came after
    assert not current.full and current.records == {"y": ("{}", None)}
    assert store.edit("x", {"definition": "{}"}) is not None  # the name may come back
    assert store.changes(kept).records == {"x": ("{}", None)}


def test_every_redis_history_key_has_a_ttl(backend: Backend, store: Store) -> None:
    if backend.name != "redis":
        pytest.skip("keys and TTLs are Redis's")
    assert store.acquire("a", LONG)
    store.record([("live", "1"), ("gone", "1")])
    assert store.claim("a", {"live": (10, "fp")}, history=[("live", "2")]) == {"live"}
    assert store.forget("a", ["gone"])
    client = redis.Redis.from_url(backend.url)
    try:
        live = client.pttl(f"{{{backend.prefix}}}:history:live")
        gone = client.pttl(f"{{{backend.prefix}}}:history:gone")
    finally:
        client.close()
    assert retention.GONE_TTL_MS < live <= retention.HISTORY_TTL_MS
    assert 0 < gone <= retention.GONE_TTL_MS
