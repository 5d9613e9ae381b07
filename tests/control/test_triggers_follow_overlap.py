"""A trigger follows its entry's overlap policy (docs/design.md §12-13), in-process:
ScheduleAdmin and schedulers on the real Redis store and broker, a run in progress stood for by
its run lease in the store (as a worker holds it). With a real worker and beat:
tests/worker/test_triggers_follow_overlap.py.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator

import pytest
import redis
from celery import Celery

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.control import polling as control
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.pause_and_trigger import Trigger, encode_trigger
from celery_hashbeat.control.refusals import RunInProgressError
from celery_hashbeat.observe.history import decode
from tests.support.beat_fixtures import Broker, Clock, Make, drain

POLL_S = 0.01
RUNNING = "0b5b6d0e-0000-4000-8000-00000000feed"
YEARLY = hashcron("H H 1 1 *")
LEASE_MS = 60_000


@pytest.fixture(autouse=True)
def poll_every_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(control, "POLL_S", POLL_S)


@pytest.fixture
def admin(app: Celery, clock: Clock) -> Iterator[ScheduleAdmin]:
    made = ScheduleAdmin(app)
    made.clock = clock
    yield made
    made.close()


#: Makes the one beat of a test, leading, for entry "long" with the given ``overlap``; with
#: ``running``, a run of the entry then holds its run lease (task RUNNING).
Lead = Callable[..., Scheduler]


@pytest.fixture
def lead(admin: ScheduleAdmin, app: Celery, clock: Clock, schedulers: Make) -> Lead:
    def make(overlap: str, running: bool = True) -> Scheduler:
        app.conf.beat_schedule = {"long": {"task": "t", "schedule": YEARLY, "overlap": overlap}}
        beat = schedulers(clock)
        read(beat)
        if running:
            assert admin.store.hold_run("long", RUNNING, LEASE_MS)
        return beat

    return make


def read(*beats: object) -> None:
    time.sleep(POLL_S * 1.5)
    for beat in beats:
        drain(beat)  # type: ignore[arg-type]


def triggered_ids(broker: Broker) -> list[str]:
    return [h["id"] for h in broker.new() if "hashbeat_trigger" in h]


def history(admin: ScheduleAdmin) -> list[tuple[str, str, str]]:
    records = [decode(text) for text in admin.store.history("long", 10)]
    return [(r.outcome, r.task_id, r.reason) for r in records if r is not None]


def test_skip_refuses_a_trigger_while_a_run_holds_the_lease_and_force_sends_it_recorded(
    admin: ScheduleAdmin, broker: Broker, lead: Lead
) -> None:
    beat = lead("skip")
    with pytest.raises(RunInProgressError, match=f"task {RUNNING}.*--force") as refused:
        admin.trigger("long")
    assert refused.value.exit_code == 6
    read(beat)
    assert triggered_ids(broker) == []
    forced = admin.trigger("long", force=True)
    assert forced.forced and forced.running == RUNNING
    read(beat)
    assert triggered_ids(broker) == [str(forced)]
    beat.close()
    assert ("trigger", str(forced), "forced past the overlap guard") in history(admin)


def test_the_leader_skips_a_trigger_that_reaches_it_while_a_run_holds_the_lease(
    admin: ScheduleAdmin, broker: Broker, clock: Clock, lead: Lead
) -> None:
    beat = lead("skip", running=False)
    # Asked while the entry was free; its run started before the leader took the trigger.
    admin.store.ask(encode_trigger(Trigger("long", "asked-before-the-run", int(clock() * 1000))))
    assert admin.store.hold_run("long", RUNNING, LEASE_MS)
    read(beat, beat)
    assert triggered_ids(broker) == []
    assert admin.store.triggers() == []
    beat.close()
    outcome, task_id, reason = history(admin)[0]
    assert (outcome, task_id) == ("skipped", "asked-before-the-run")
    assert RUNNING in reason and "skip" in reason


def test_a_trigger_of_a_free_guarded_entry_takes_the_run_lease_for_its_own_task(
    admin: ScheduleAdmin, broker: Broker, lead: Lead
) -> None:
    beat = lead("skip", running=False)
    task_id = admin.trigger("long")
    assert task_id.running is None
    read(beat)
    assert triggered_ids(broker) == [task_id]
    assert admin.store.running(["long"]) == {"long": task_id}
    with pytest.raises(RunInProgressError):
        admin.trigger("long")  # the triggered run now guards the entry


def test_buffer_one_keeps_the_trigger_waiting_until_the_run_ends(
    admin: ScheduleAdmin, broker: Broker, lead: Lead
) -> None:
    beat = lead("buffer_one")
    task_id = admin.trigger("long")
    assert task_id.running == RUNNING and "waits" in task_id.note
    for _ in range(3):
        read(beat)
    assert triggered_ids(broker) == []
    assert len(admin.store.triggers()) == 1  # still waiting, in the store
    assert admin.store.release_run("long", RUNNING)
    read(beat, beat)
    assert triggered_ids(broker) == [task_id]
    read(beat)
    assert triggered_ids(broker) == []  # once


def test_replace_revokes_the_run_in_progress_and_sends_the_trigger(
    admin: ScheduleAdmin, broker: Broker, lead: Lead, redis_url: str
) -> None:
    beat = lead("replace")
    task_id = admin.trigger("long")
    assert "revokes" in task_id.note
    # Celery's remote control goes out on the broker's pub/sub: listen as a worker would.
    client = redis.Redis.from_url(redis_url)
    listener = client.pubsub()
    listener.psubscribe("*pidbox*")
    try:
        read(beat)
        assert triggered_ids(broker) == [task_id]
        deadline, heard = time.monotonic() + 5, []
        while not heard and time.monotonic() < deadline:
            message = listener.get_message(timeout=0.5)
            if message and message["type"] == "pmessage":
                body = json.loads(base64.b64decode(json.loads(message["data"])["body"]))
                if body.get("method") == "revoke":
                    heard.append(body["arguments"])
        assert heard and heard[0]["task_id"] == RUNNING and heard[0]["terminate"] is True
    finally:
        listener.close()
        client.close()
