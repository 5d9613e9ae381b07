"""The batch sink keeps a plan per entry it sent (publish/plans.py), each holding the entry's
arguments and a copy of its message: a plan must not outlive its entry (issue 22, defect 10).
Entries with large arguments are added at run time, sent, and removed, round after round; the
plans the leader keeps must stay bounded by the entries in the schedule, not grow with every
entry that ever was."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from celery import Celery

from celery_hashbeat import hashcron
from celery_hashbeat.control import polling as control
from celery_hashbeat.control.admin import ScheduleAdmin
from tests.support.beat_fixtures import Broker, Clock, Make, drain

EVERY_SECOND = hashcron("* * * * * *")
POLL_S = 0.01
#: Entries added, sent and removed per round, and how many rounds.
PER_ROUND, ROUNDS = 40, 6
#: Each entry's argument: big enough that kept plans would show in memory.
ARG = "x" * 10_000


def tick_task(*args: object, **kwargs: object) -> None:
    """The task the stored entries run."""


@pytest.fixture
def admin(app: Celery, clock: Clock, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScheduleAdmin]:
    """Adds and removes stored entries, which running beats read at their next poll (made
    frequent here)."""
    monkeypatch.setattr(control, "POLL_S", POLL_S)
    app.task(name="plans.tick", shared=False)(tick_task)
    operator = ScheduleAdmin(app)
    operator.clock = clock
    try:
        yield operator
    finally:
        operator.close()


def test_plans_of_removed_entries_are_not_kept(
    admin: ScheduleAdmin, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    beat = schedulers(clock)
    drain(beat)
    kept = []
    for round_ in range(ROUNDS):
        names = [f"big-{round_}-{i}" for i in range(PER_ROUND)]
        for name in names:
            admin.add(name, task="plans.tick", schedule=EVERY_SECOND, args=[ARG])
        time.sleep(POLL_S * 1.5)
        drain(beat)
        clock.advance(1)
        drain(beat)
        sent = {h["hashbeat_entry"] for h in broker.new()}
        assert set(names) <= sent, "the round's entries were not all sent"
        for name in names:
            admin.remove(name)
        time.sleep(POLL_S * 1.5)
        drain(beat)
        assert not set(names) & set(beat.schedule), "removed entries still scheduled"
        kept.append(beat.publisher.kept)
    live = len(beat.schedule)
    # Plans are kept for entries in the schedule (and at most a round's worth of entries gone
    # since the last sweep), never for every entry that ever was.
    assert max(kept) <= live + 2 * PER_ROUND, kept
    assert kept[-1] < PER_ROUND * ROUNDS, kept
