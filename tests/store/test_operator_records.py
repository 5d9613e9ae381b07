"""The operators' records (store/operations.py): the audit trail and the running schedules, on
both stores."""

from __future__ import annotations

import time

from celery_hashbeat.store import Store
from celery_hashbeat.store.operations import SCHEDULES_KEPT


def test_the_audit_trail_reads_newest_first_each_stamped_by_the_store(store: Store) -> None:
    before_ms = int(time.time() * 1000) - 5_000
    taken = [store.write_audit(f'{{"n": {n}}}') for n in range(3)]
    trail = store.audit_trail()
    assert [text for _, text in trail] == ['{"n": 2}', '{"n": 1}', '{"n": 0}']
    assert [at for at, _ in trail] == taken[::-1]
    assert all(at >= before_ms for at in taken)
    assert [text for _, text in store.audit_trail(limit=2)] == ['{"n": 2}', '{"n": 1}']


def test_the_audit_trail_keeps_only_the_newest_records(store: Store) -> None:
    for n in range(7):
        store.write_audit(str(n), keep=4)
    assert [text for _, text in store.audit_trail()] == ["6", "5", "4", "3"]


def test_the_audit_trail_drops_records_older_than_its_age(store: Store) -> None:
    store.write_audit("old")
    time.sleep(0.05)
    store.write_audit("new", keep_ms=20)
    assert [text for _, text in store.audit_trail()] == ["new"]


def test_a_digest_keeps_the_definitions_recorded_last(store: Store) -> None:
    store.record_schedule("aaaa", '{"x": 1}')
    store.record_schedule("bbbb", '{"y": 1}')
    store.record_schedule("aaaa", '{"x": 2}')
    assert store.schedules() == {"aaaa": '{"x": 2}', "bbbb": '{"y": 1}'}


def test_only_the_newest_digests_keep_their_definitions(store: Store) -> None:
    for n in range(SCHEDULES_KEPT + 3):
        store.record_schedule(f"d{n:04d}", str(n))
        time.sleep(0.002)
    kept = store.schedules()
    assert len(kept) == SCHEDULES_KEPT
    assert "d0000" not in kept and f"d{SCHEDULES_KEPT + 2:04d}" in kept
