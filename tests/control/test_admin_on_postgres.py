"""The runtime controls on the PostgreSQL store: the same scenarios as
test_admin_changes_reach_running_beats.py (ScheduleAdmin writes, in-process schedulers on a moved
clock read), with the app's store a database of the test's own on the session's PostgreSQL (the
broker stays the session Redis)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery import Celery

from tests.control.test_admin_changes_reach_running_beats import (
    test_a_trigger_is_sent_once_with_its_own_id_and_leaves_the_fence_alone,
    test_an_added_entry_fires_at_its_next_slot_and_a_removed_one_stops,
    test_max_runs_counts_in_the_store_across_a_failover,
    test_pause_sends_nothing_and_resume_continues_from_now_without_a_burst,
)

__all__ = [
    "test_a_trigger_is_sent_once_with_its_own_id_and_leaves_the_fence_alone",
    "test_an_added_entry_fires_at_its_next_slot_and_a_removed_one_stops",
    "test_max_runs_counts_in_the_store_across_a_failover",
    "test_pause_sends_nothing_and_resume_continues_from_now_without_a_burst",
]


@pytest.fixture
def app(app: Celery, postgres_url: str) -> Iterator[Celery]:
    """The session's app fixture, its store moved to PostgreSQL."""
    app.conf.hashbeat_store_url = postgres_url
    yield app
