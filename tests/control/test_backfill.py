"""Backfill in-process (docs/design.md §19): ScheduleAdmin.backfill and a leading Scheduler on the
real Redis store and broker, on the tests' clock. A run in progress is stood for by its run lease
in the store, as a worker holds it. With a real worker, beat and command:
tests/worker/test_backfill_sends_each_slot_once.py.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone

import pytest
import redis
from celery import Celery

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.backfill import Request, decode_request, encode_request
from celery_hashbeat.control.pause_and_trigger import decode_trigger
from celery_hashbeat.control.refusals import AdminError, UnknownEntryError
from celery_hashbeat.control.stored_text import DefinitionError
from celery_hashbeat.publish.message import slot_task_id
from celery_hashbeat.store.redis.scripts.sent import CLAIM_SLOTS_SCRIPT
from tests.control.fixtures import read
from tests.support.beat_fixtures import Broker, Clock, Make, run_for
from tests.support.proxy import FaultProxy
from tests.support.redis_server import RedisProcess

EVERY_10S = hashcron("*/10 * * * * *")
RUNNING = "0b5b6d0e-0000-4000-8000-00000000beef"
LEASE_MS = 60_000


def at(clock: Clock, seconds: float = 0) -> datetime:
    return datetime.fromtimestamp(clock() + seconds, timezone.utc)


def ms(clock: Clock, seconds: float = 0) -> int:
    return int((clock() + seconds) * 1000)


def slot_ids(broker: Broker) -> list[str]:
    return [h["id"] for h in broker.new() if "hashbeat_slot" in h]


def leading(app: Celery, clock: Clock, schedulers: Make, overlap: str = "allow") -> Scheduler:
    """A leader of entry "tick" (every 10 s) that has sent its slot at +30 s only: it caught up
    the latest slot missed, not those at +10 s and +20 s."""
    app.conf.beat_schedule = {"tick": {"task": "t", "schedule": EVERY_10S, "overlap": overlap}}
    beat = schedulers(clock, target=app)
    read(beat)
    clock.advance(35)
    read(beat)
    return beat


def broker_apart(key_prefix: str, broker_url: str, store_url: str) -> Celery:
    """An app whose broker (a private Redis a test may kill or cut off) is not its store, with
    publish timeouts short enough that a dead broker fails a publish within the test."""
    app = Celery(f"backfill-{key_prefix}", set_as_current=False)
    app.conf.update(
        broker_url=broker_url,
        broker_transport_options={"socket_timeout": 1.0},
        broker_connection_timeout=1.0,
        task_default_queue="backfilled",
        beat_enable_remote_control=False,
        hashbeat_store_url=store_url,
        hashbeat_key_prefix=key_prefix,
    )
    return app


def end_run(admin: ScheduleAdmin, clock: Clock) -> None:
    """The run of the slot the beat sent (at +30 s) ends, as its worker would end it."""
    assert admin.store.release_run("tick", slot_task_id("tick", ms(clock, -5)))


def test_a_backfill_sends_each_slot_not_sent_once_with_its_slot_id(
    admin: ScheduleAdmin, app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    start = at(clock)
    beat = leading(app, clock, schedulers)
    assert slot_ids(broker) == [slot_task_id("tick", ms(clock, -5))]
    dry = admin.backfill("tick", start, at(clock), dry_run=True)
    assert dry.slots == tuple(ms(clock, s) for s in (-35, -25, -15, -5))
    assert dry.sent == {ms(clock, -5)} and dry.request is None
    assert admin.store.triggers() == []
    done = admin.backfill("tick", start, at(clock), reason="outage")
    read(beat)
    assert slot_ids(broker) == [slot_task_id("tick", slot) for slot in done.to_send]
    again = admin.backfill("tick", start, at(clock))
    assert again.to_send == []
    read(beat)
    assert slot_ids(broker) == []
    # The regular slots go on.
    clock.advance(10)
    read(beat)
    assert slot_ids(broker) == [slot_task_id("tick", ms(clock, -5))]
    changes = [c for c in admin.audit("tick") if c.action == "backfill"]
    assert [c.details["to_send"] for c in changes] == [0, 3]
    # The history says which sends were the backfill's.
    backfilled = [r for r in admin.recent("tick") if r.reason == f"backfill {done.request}"]
    assert sorted((r.outcome, r.slot, r.task_id) for r in backfilled) == [
        ("sent", slot, slot_task_id("tick", slot)) for slot in done.to_send
    ]
    assert changes[-1].reason == "outage" and changes[-1].details["slots"] == 4


def test_a_due_slot_the_beat_has_not_sent_yet_is_sent_once_by_whichever_claims_it(
    admin: ScheduleAdmin, app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    beat = leading(app, clock, schedulers)
    slot_ids(broker)
    clock.advance(10)  # the slot at +40 s is due; the beat has not ticked
    done = admin.backfill("tick", at(clock, -12), at(clock))
    assert done.to_send == [ms(clock, -5)]
    read(beat, beat)
    assert slot_ids(broker) == [slot_task_id("tick", ms(clock, -5))]


def backfilled_during_a_run(
    admin: ScheduleAdmin,
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    overlap: str,
) -> tuple[Scheduler, datetime]:
    """A leader of "tick" with ``overlap`` (and from when its slots count), asked to backfill its
    slots at +0 s and +10 s while a run of it holds the run lease (task RUNNING): none is sent."""
    start = at(clock)
    beat = leading(app, clock, schedulers, overlap=overlap)
    slot_ids(broker)
    end_run(admin, clock)
    assert admin.store.hold_run("tick", RUNNING, LEASE_MS)
    admin.backfill("tick", start, at(clock, -20))
    read(beat, beat)
    assert slot_ids(broker) == []
    return beat, start


def test_skip_drops_the_slots_while_a_run_holds_the_lease_and_leaves_them_unsent(
    admin: ScheduleAdmin, app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    beat, start = backfilled_during_a_run(admin, app, broker, clock, schedulers, "skip")
    assert admin.store.triggers() == []  # dropped, not waiting
    assert admin.store.release_run("tick", RUNNING)
    # Nothing was recorded as sent: once the run ended, a backfill sends them, one a turn.
    done = admin.backfill("tick", start, at(clock, -20))
    assert done.to_send == [ms(clock, -35), ms(clock, -25)]
    read(beat)
    assert slot_ids(broker) == [slot_task_id("tick", ms(clock, -35))]
    assert admin.store.running(["tick"]) == {"tick": slot_task_id("tick", ms(clock, -35))}


def test_buffer_one_keeps_the_backfill_waiting_until_the_run_ends(
    admin: ScheduleAdmin, app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    beat, _ = backfilled_during_a_run(admin, app, broker, clock, schedulers, "buffer_one")
    assert len(admin.store.triggers()) == 1  # still waiting
    assert admin.store.release_run("tick", RUNNING)
    read(beat)
    first = slot_task_id("tick", ms(clock, -35))
    assert slot_ids(broker) == [first]
    assert admin.store.running(["tick"]) == {"tick": first}
    assert admin.store.release_run("tick", first)  # the worker ends it
    read(beat)
    assert slot_ids(broker) == [slot_task_id("tick", ms(clock, -25))]


def test_bad_ranges_are_refused_with_what_to_do(
    admin: ScheduleAdmin, app: Celery, clock: Clock, schedulers: Make
) -> None:
    app.conf.beat_schedule = {
        "tick": {"task": "t", "schedule": EVERY_10S},
        "chained": {"task": "t", "schedule": timedelta(seconds=10)},
    }
    beat = schedulers(clock)
    read(beat)
    clock.advance(60)
    read(beat)
    with pytest.raises(AdminError, match="in the future"):
        admin.backfill("tick", at(clock, -30), at(clock, 30))
    with pytest.raises(AdminError, match="before --from"):
        admin.backfill("tick", at(clock, -10), at(clock, -30))
    with pytest.raises(AdminError, match="no time zone"):
        admin.backfill("tick", "2030-01-01T00:00", at(clock))
    with pytest.raises(AdminError, match=r"more than 2 slots.*--yes"):
        admin.backfill("tick", at(clock, -60), at(clock), limit=2)
    with pytest.raises(AdminError, match="plain interval"):
        admin.backfill("chained", at(clock, -60), at(clock))
    with pytest.raises(UnknownEntryError):
        admin.backfill("nothing", at(clock, -60), at(clock))
    # What was refused queued nothing and recorded nothing.
    assert admin.store.triggers() == []
    assert admin.audit() == []


def test_a_stored_request_reads_back_and_a_trigger_reader_refuses_it() -> None:
    request = Request("tick", "id-1", 1_000, 2_000, 500)
    text = encode_request(request)
    assert decode_request(text) == request
    assert decode_request('{"entry": "tick", "id": "x", "at": 1}') is None  # a trigger
    with pytest.raises(DefinitionError):
        decode_request('{"backfill": "x", "entry": "tick", "from": "soon", "to": 1, "at": 1}')
    # A beat that knows only triggers drops it as unreadable rather than running it.
    with pytest.raises(DefinitionError):
        decode_trigger(text)


def test_slots_a_dead_broker_refused_are_given_back_and_sent_once_it_returns(
    private_redis: RedisProcess,
    redis_url: str,
    key_prefix: str,
    clock: Clock,
    schedulers: Make,
) -> None:
    app = broker_apart(key_prefix, private_redis.url, redis_url)
    start = at(clock)
    beat = leading(app, clock, schedulers)
    admin = ScheduleAdmin(app)
    admin.clock = clock
    try:
        private_redis.kill()
        done = admin.backfill("tick", start, at(clock))
        read(beat)
        # Surely not sent: given back (no longer recorded) and the request kept for later.
        assert admin.store.recorded("tick", done.to_send).sent == set()
        assert len(admin.store.triggers()) == 1
        private_redis.start()
        read(beat, beat)
        client = redis.Redis.from_url(private_redis.url)
        raw = client.lrange("backfilled", 0, -1)
        client.close()
        ids = [json.loads(message)["headers"]["id"] for message in reversed(raw)]
        assert ids == [slot_task_id("tick", slot) for slot in done.to_send]
        assert admin.store.triggers() == []
    finally:
        admin.close()
        app.close()


def test_a_claim_whose_reply_was_lost_is_asked_again_and_its_slots_sent_once(
    private_redis: RedisProcess, key_prefix: str, clock: Clock, schedulers: Make
) -> None:
    """The store runs the backfill's claim but the beat never hears its answer: the next turn
    asks again as the same claimer, takes the slots that claim recorded, and sends them once,
    rather than leaving them recorded as sent and never sent."""
    claim_sha = hashlib.sha1(CLAIM_SLOTS_SCRIPT.encode()).hexdigest().encode()
    with FaultProxy(private_redis.port) as proxy:
        app = Celery(f"backfill-{key_prefix}", set_as_current=False)
        app.conf.update(
            broker_url=private_redis.url,
            task_default_queue="backfilled",
            beat_enable_remote_control=False,
            hashbeat_store_url=proxy.url("socket_timeout=0.5"),
            hashbeat_key_prefix=key_prefix,
        )
        start = at(clock)
        beat = leading(app, clock, schedulers)
        app.conf.hashbeat_store_url = private_redis.url
        admin = ScheduleAdmin(app)
        admin.clock = clock
        broker = Broker(redis.Redis.from_url(private_redis.url), "backfilled")
        try:
            broker.new()
            # Loaded, so that the marked request is the claim itself, not a NOSCRIPT probe.
            assert broker.client.script_load(CLAIM_SLOTS_SCRIPT) == claim_sha.decode()
            done = admin.backfill("tick", start, at(clock, -10))
            assert len(done.to_send) == 3
            proxy.swallow_reply_to(claim_sha, seconds=1.0)
            read(beat)
            assert proxy.wait_triggered(5)
            assert slot_ids(broker) == []
            # The store answers again; the beat leads again and takes the request up.
            run_for(beat, 10, until=lambda: len(broker.headers()) >= 3)
            read(beat)
            assert slot_ids(broker) == [slot_task_id("tick", slot) for slot in done.to_send]
            assert admin.store.triggers() == []
        finally:
            broker.client.close()
            admin.close()
            app.close()


def test_a_paused_entry_is_backfilled_as_asked_and_stays_paused(
    admin: ScheduleAdmin, app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    start = at(clock)
    beat = leading(app, clock, schedulers)
    slot_ids(broker)
    admin.pause("tick", reason="supplier down")
    read(beat)
    done = admin.backfill("tick", start, at(clock))
    read(beat)
    assert slot_ids(broker) == [slot_task_id("tick", slot) for slot in done.to_send]
    clock.advance(20)
    read(beat)
    assert slot_ids(broker) == []  # its own slots stay held back


def test_a_fanned_out_entry_is_backfilled_copy_by_copy(
    admin: ScheduleAdmin, app: Celery, clock: Clock
) -> None:
    app.conf.beat_schedule = {"fan": {"task": "t", "schedule": EVERY_10S, "workers": "*"}}
    store = admin.store
    assert store.acquire("leader", LEASE_MS)
    assert store.set_roster("leader", ["w1@h", "w2@h"], ms(clock))
    assert store.claim("leader", {"fan@w1@h": (ms(clock, 10), "fp")}) == {"fan@w1@h"}
    clock.advance(30)
    with pytest.raises(AdminError, match=r"copy by its name \(fan@w1@h, fan@w2@h\)"):
        admin.backfill("fan", at(clock, -30), at(clock), dry_run=True)
    done = admin.backfill("fan@w1@h", at(clock, -30), at(clock), dry_run=True)
    assert done.slots == tuple(ms(clock, s) for s in (-30, -20, -10, 0))
    assert done.sent == {ms(clock, -20)}
    with pytest.raises(UnknownEntryError):
        admin.backfill("fan@w9@h", at(clock, -30), at(clock), dry_run=True)
