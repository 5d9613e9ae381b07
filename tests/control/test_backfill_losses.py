"""Backfills the leader cannot finish as asked: a range ending past its clock waits for it, a
request it could not queue again stays taken in the store for the next take, and the slots it
may leave unsent (a claim it could not give back) are logged by name, never dropped in silence
(beat/backfill.py)."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit

import pytest
from celery import Celery
from celery.signals import after_task_publish, before_task_publish

from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.backfill import Request, encode_request, slot_iso
from celery_hashbeat.publish.message import slot_task_id
from tests.control.fixtures import read
from tests.control.test_backfill import LEASE_MS, at, broker_apart, leading, ms, slot_ids
from tests.support.beat_fixtures import Broker, Clock, Make
from tests.support.proxy import FaultProxy
from tests.support.redis_server import RedisProcess


def test_a_range_ending_past_the_leaders_clock_waits_for_it_rather_than_ending_early(
    admin: ScheduleAdmin, app: Celery, broker: Broker, clock: Clock, schedulers: Make
) -> None:
    """The operator's clock may run ahead of the leader's (a host's clock, a step back): the
    slots of the range still in the leader's future are sent once its clock passes them, not
    dropped with the request (the matrix's clock-step cell lost them so, logging it done)."""
    start = ms(clock)
    beat = leading(app, clock, schedulers)
    admin.pause("tick", reason="only the backfill sends it")
    read(beat)
    slot_ids(broker)
    ahead = Request("tick", "operator-ahead", start, ms(clock, 20), ms(clock, 20))
    admin.store.ask(encode_request(ahead))
    read(beat)
    assert slot_ids(broker) == [slot_task_id("tick", ms(clock, s)) for s in (-35, -25, -15)]
    clock.advance(1)
    read(beat)  # a turn with nothing due yet keeps the request
    assert slot_ids(broker) == []
    clock.advance(19)
    read(beat)
    assert slot_ids(broker) == [slot_task_id("tick", ms(clock, s)) for s in (-15, -5)]
    clock.advance(10)
    read(beat)
    assert slot_ids(broker) == []


def test_a_backfill_a_deposed_leader_cannot_queue_again_stays_taken_for_the_next_leader(
    admin: ScheduleAdmin,
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The leader loses its lease during a turn (another beat took it while it published): it
    can no longer settle its turn, but the store still holds the request as the turn took it,
    so the next leader's take gets it back (recovered) rather than it being lost; the deposed
    leader says so, with the slots left."""
    beat = leading(app, clock, schedulers)
    admin.pause("tick", reason="only the backfill sends it")
    read(beat)
    slot_ids(broker)
    ahead = Request("tick", "deposed-mid-turn", ms(clock, -40), ms(clock, 20), ms(clock))
    admin.store.ask(encode_request(ahead))

    def take_the_lease(**_: object) -> None:
        lease = admin.store.leader()
        if lease is not None and lease.token != "another:1:beat":
            admin.store.release(lease.token)
            assert admin.store.acquire("another:1:beat", LEASE_MS)

    after_task_publish.connect(take_the_lease, weak=False)
    try:
        with caplog.at_level(logging.WARNING, logger="celery_hashbeat"):
            read(beat)
    finally:
        after_task_publish.disconnect(take_the_lease)
    assert len(slot_ids(broker)) == 3
    lines = [r.getMessage() for r in caplog.records if "deposed-mid-turn" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "the store keeps it as this turn took it" in lines[0]
    assert f"from {slot_iso(ms(clock, -5) + 1)} to {slot_iso(ms(clock, 20))}" in lines[0]
    taken = admin.store.take_triggers("another:1:beat")
    assert taken == [encode_request(ahead)] and taken.recovered == 1


def test_slots_whose_publish_failed_and_whose_claim_stays_recorded_are_logged_lost(
    private_redis: RedisProcess,
    redis_url: str,
    key_prefix: str,
    clock: Clock,
    schedulers: Make,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The broker refuses the backfilled slots (and a trigger) and the store stops answering
    before they can be given back: the store still counts the slots as sent, so no backfill
    will send them; each is logged as lost rather than left in silence, and so is the trigger,
    which may not be back in the queue. The request stays taken in the store, for the next
    take."""
    store_port = urlsplit(redis_url).port
    assert store_port is not None
    with FaultProxy(store_port) as proxy:
        app = broker_apart(key_prefix, private_redis.url, proxy.url("socket_timeout=0.5"))
        start = at(clock)
        beat = leading(app, clock, schedulers)
        app.conf.hashbeat_store_url = redis_url
        admin = ScheduleAdmin(app)
        admin.clock = clock

        def store_gone(**_: object) -> None:
            proxy.refuse()

        try:
            private_redis.kill()
            done = admin.backfill("tick", start, at(clock))
            triggered = admin.trigger("tick")
            before_task_publish.connect(store_gone, weak=False)
            with caplog.at_level(logging.ERROR, logger="celery_hashbeat"):
                read(beat)
            assert admin.store.recorded("tick", done.to_send).sent == set(done.to_send)
            lost = [r.getMessage() for r in caplog.records if "cannot be sent" in r.getMessage()]
            assert len(lost) == len(done.to_send) == 3, lost
            for slot, line in zip(done.to_send, lost, strict=True):
                assert f"backfill {done.request} of tick: slot {slot_iso(slot)}" in line
            lines = [r.getMessage() for r in caplog.records]
            assert any(f"trigger {triggered} of tick may not have gone out" in x for x in lines)
            # The request is not lost with the give-back: the store keeps it as the turn took it.
            assert any(done.request and done.request in text for text in admin.store.triggers())
        finally:
            before_task_publish.disconnect(store_gone)
            admin.close()
            app.close()


def test_what_a_leader_took_and_never_settled_is_taken_up_its_backfill_sent_its_trigger_not(
    admin: ScheduleAdmin,
    app: Celery,
    broker: Broker,
    clock: Clock,
    schedulers: Make,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A turn took a backfill request and a trigger and never settled (the leader was killed,
    or its settle never reached the store): the next take hands both back as recovered. The
    backfill is sent, each slot once (the record of sent slots says which went); the trigger is
    not sent again, since nothing says whether it went out, and it is logged as perhaps lost."""
    start = at(clock)
    beat = leading(app, clock, schedulers)
    slot_ids(broker)
    done = admin.backfill("tick", start, at(clock))
    triggered = admin.trigger("tick")
    lease = admin.store.leader()
    assert lease is not None
    assert len(admin.store.take_triggers(lease.token)) == 2  # the turn that never settled
    with caplog.at_level(logging.ERROR, logger="celery_hashbeat"):
        read(beat)
    sent = [h["id"] for h in broker.new()]
    assert sent == [slot_task_id("tick", slot) for slot in done.to_send]
    lines = [r.getMessage() for r in caplog.records]
    assert any(f"trigger {triggered} of tick may not have gone out" in x for x in lines), lines
    assert admin.store.triggers() == []
    clock.advance(1)
    read(beat)
    assert slot_ids(broker) == []
