"""The batch path sends what ``apply_async`` sends (issue 12): the same slots published both ways
by one beat, read back from the real Redis broker and compared field by field, along with what
``before_task_publish`` and ``after_task_publish`` receivers were given.

Only kombu's ``delivery_tag`` may differ: the Redis transport gives every message a fresh random
one (a uuid4, used to ack it), whichever way it was published. ``reply_to`` is the publishing
thread's id in both, since one beat publishes both ways on its one publishing thread.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
import redis
from celery import Celery, signals
from kombu import Exchange, Queue
from kombu.compression import decompress
from kombu.serialization import loads

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.beat.instants import LEAD_MS
from tests.support.beat_fixtures import T0, Clock

#: The broker's per-message field, allowed to differ (see the module's docstring).
PER_MESSAGE = {"delivery_tag"}


def beat_schedule(q: str) -> dict[str, dict[str, Any]]:
    """Entries that exercise every option the batch path handles, and one it leaves to
    ``apply_async`` (``countdown``)."""
    every = hashcron("* * * * *")
    return {
        "plain": {"task": "shop.plain", "schedule": every, "args": (1, "a"), "kwargs": {"x": [1]}},
        "remote": {"task": "shop.remote", "schedule": every, "options": {"queue": f"{q}-other"}},
        "routed": {"task": "shop.routed", "schedule": every},
        "topic": {
            "task": "shop.plain",
            "schedule": every,
            "options": {"queue": f"{q}-topic", "routing_key": "t.a"},
        },
        "priority": {
            "task": "shop.plain",
            "schedule": every,
            "options": {"queue": f"{q}-prio", "priority": 7},
        },
        "encoded": {
            "task": "shop.plain",
            "schedule": every,
            "args": ({"nested": [1, 2.5, None]},),
            "options": {"serializer": "pickle", "compression": "zlib", "headers": {"t": "acme"}},
        },
        "expiring": {"task": "shop.plain", "schedule": every, "options": {"expires": 30}},
        "limited": {"task": "shop.limited", "schedule": every},
        "guarded": {"task": "shop.plain", "schedule": every, "overlap": "skip"},
        "countdown": {"task": "shop.plain", "schedule": every, "options": {"countdown": 5}},
    }


def anything(*args: Any, **kwargs: Any) -> None:
    """A task that takes any arguments (never run: no worker)."""


def nothing() -> None:
    """A task that takes none."""


@pytest.fixture
def shop(app: Celery, key_prefix: str) -> Celery:
    q = f"{key_prefix}-q"
    app.conf.update(
        task_default_queue=q,
        task_queues=[
            Queue(q),
            Queue(f"{q}-other"),
            Queue(f"{q}-routed"),
            Queue(f"{q}-topic", Exchange(f"{q}-tx", "topic"), routing_key="t.#"),
            Queue(f"{q}-prio", queue_arguments={"x-max-priority": 10}),
        ],
        task_routes={"shop.routed": {"queue": f"{q}-routed"}},
        accept_content=["json", "pickle"],
        beat_schedule=beat_schedule(q),
    )
    # Not shared: registered on this app only, not on every app made after it.
    app.task(name="shop.plain", shared=False)(anything)
    app.task(name="shop.routed", shared=False)(nothing)
    limits = {"time_limit": 30, "soft_time_limit": 20, "ignore_result": True}
    app.task(name="shop.limited", shared=False, **limits)(nothing)
    # Celery's now, as both paths read it for expires and countdown: the same instant for both.
    moment = datetime(2030, 1, 1, 0, 1, tzinfo=timezone.utc)
    app.now = lambda: moment  # type: ignore[method-assign]
    return app


class Recorded:
    """What the publish signals' receivers were given, in order."""

    def __init__(self, which: tuple[str, ...]) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._signals = [getattr(signals, f"{name}_task_publish") for name in which]

    def __enter__(self) -> Recorded:
        for signal in self._signals:
            signal.connect(self._receive, weak=False)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signal in self._signals:
            signal.disconnect(self._receive)

    def _receive(self, signal: Any, sender: str, **kwargs: Any) -> None:
        kwargs["declare"] = [queue.name for queue in kwargs.get("declare") or ()]
        self.calls.append((f"{signal.name}:{sender}", kwargs))


def per_message(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, list[Any]]:
    """The signal calls of each message (by task id), in order."""
    found: dict[str, list[Any]] = {}
    for name, kwargs in calls:
        found.setdefault(kwargs["headers"]["id"], []).append((name, kwargs))
    return found


def drain(client: redis.Redis, prefix: str) -> dict[str, list[dict[str, Any]]]:
    """Every message on the test's queues (each priority level is a list of its own), oldest
    first, decoded as a worker does; the lists are emptied."""
    found = {}
    for key in sorted(client.scan_iter(match=f"{prefix}-q*", count=1000)):
        if client.type(key) != b"list":
            continue
        raw = client.lrange(key, 0, -1)
        client.delete(key)
        found[key.decode()] = [decode(json.loads(message)) for message in reversed(raw)]
    return found


def decode(envelope: dict[str, Any]) -> dict[str, Any]:
    body = base64.b64decode(envelope["body"])
    compression = envelope["headers"].get("compression")
    if compression:
        body = decompress(body, compression)
    payload = loads(
        body,
        envelope["content-type"],
        envelope["content-encoding"],
        accept=["application/json", "application/x-python-serialize"],
    )
    properties = {k: v for k, v in envelope["properties"].items() if k not in PER_MESSAGE}
    return {**envelope, "properties": properties, "payload": payload}


@pytest.fixture
def beat(shop: Celery, schedulers: Callable[..., Scheduler], clock: Clock) -> Iterator[Scheduler]:
    scheduler = schedulers(clock)
    scheduler.tick()  # leads
    assert scheduler.leadership.lease.leader
    yield scheduler


def assert_same_messages(
    ours: dict[str, list[dict[str, Any]]], theirs: dict[str, list[dict[str, Any]]], prefix: str
) -> None:
    """The same messages on the same queues, field by field."""
    assert sorted(ours) == sorted(theirs)
    q = f"{prefix}-q"
    queues = {key.split("\x06\x16")[0] for key in ours}  # a priority level's list is named so
    assert queues == {q, f"{q}-other", f"{q}-routed", f"{q}-topic", f"{q}-prio"}
    for key, messages in theirs.items():
        assert len(ours[key]) == len(messages), key
        for mine, expected in zip(ours[key], messages, strict=True):
            for field in ("headers", "properties", "content-type", "content-encoding", "body"):
                assert mine[field] == expected[field], (key, field)
            assert mine["payload"] == expected["payload"]


def publish_both_ways(
    beat: Scheduler, client: redis.Redis, prefix: str, receivers: tuple[str, ...]
) -> tuple[Any, Any]:
    """Two slots of every entry through the batch path, then through apply_async; what reached
    the broker and what the receivers got, each way."""
    slots = [
        (entry, int((T0 + minute * 60) * 1000))
        for minute in (1, 2)
        for entry in beat.entries.values()
    ]
    results = []
    for way in ("batch", "apply_async"):
        if way == "apply_async":
            beat.publisher.__dict__["_bulk"] = (
                None  # the per-message path, on the same publishing thread
            )
        with Recorded(receivers) as recorded:
            settled = beat.dispatcher.publish(slots)
        assert {s.outcome.value for s in settled} == {"sent"}, settled
        results.append((drain(client, prefix), recorded.calls))
    return results[0], results[1]


@pytest.mark.parametrize("receivers", [("after",), ("before", "after")])
def test_the_batch_path_sends_what_apply_async_sends(
    beat: Scheduler, broker: Any, key_prefix: str, receivers: tuple[str, ...]
) -> None:
    sink = beat.publisher.sink
    assert sink is not None
    (batch, batch_calls), (single, single_calls) = publish_both_ways(
        beat, broker.client, key_prefix, receivers
    )
    # Without a before_task_publish receiver, an entry's second slot is made from its first
    # (the stencil); expires (a time; Celery's backend_cleanup has one too) and countdown
    # (apply_async's own) are built every time. With one, the stencils the leader made while it
    # waited (before the receiver came) are not used: it sees every message (below).
    if receivers == ("after",):
        stencils = {name for name, plan in sink._plans.items() if plan.stencil is not None}
        assert stencils == set(beat_schedule("q")) - {"expiring", "countdown"}
    assert sum(map(len, batch.values())) == 2 * len(beat.entries)
    assert_same_messages(batch, single, key_prefix)
    # Per message, the receivers got the same; across messages, a batch fires the
    # after_task_publish of a chunk's messages once the chunk went out, not between them.
    assert per_message(batch_calls) == per_message(single_calls)
    assert len(batch_calls) == len(receivers) * 2 * len(beat.entries)


def test_messages_made_ahead_of_their_slot_are_sent_at_it_as_apply_async_sends_them(
    beat: Scheduler, broker: Any, key_prefix: str, clock: Clock
) -> None:
    """The leader wakes before a slot to make its messages (``ahead``): nothing goes out then,
    and at the slot what goes out is what apply_async sends for it. A message whose expiry
    counts from the send, or that goes through apply_async anyway, is made at the slot."""
    sink = beat.publisher.sink
    assert sink is not None
    slot = int((T0 + 60) * 1000)
    clock.now = T0 + 60 - 0.2
    wait = beat.tick()
    assert wait == pytest.approx(0.2 - LEAD_MS / 1000)  # woken next just before the slot
    made_at_slot = {"expiring", "countdown", "celery.backend_cleanup"}  # the last: not due
    assert set(beat.entries) >= made_at_slot
    assert {name for name, ready in sink._ready.items() if ready.slot == slot} == (
        set(beat.entries) - made_at_slot
    )
    assert drain(broker.client, key_prefix) == {}  # nothing sent before its slot
    clock.now = T0 + 60
    with Recorded(("after",)) as recorded:
        beat.tick()
    ahead = drain(broker.client, key_prefix)
    assert sink._ready == {}  # every message made ahead was used
    sent = {m["headers"]["hashbeat_entry"] for messages in ahead.values() for m in messages}
    assert sent == set(beat.entries) - {"celery.backend_cleanup"}  # not due at this minute
    beat.publisher.__dict__["_bulk"] = None  # the same slots through apply_async, same thread
    with Recorded(("after",)) as recorded_single:
        # In the order the tick sent them: the order the entries were added in.
        beat.dispatcher.publish(
            [(entry, slot) for entry in beat.entries.values() if entry.name in sent]
        )
    assert_same_messages(ahead, drain(broker.client, key_prefix), key_prefix)
    assert per_message(recorded.calls) == per_message(recorded_single.calls)


def test_with_a_global_keyprefix_the_batch_path_sends_what_apply_async_sends(
    shop: Celery,
    schedulers: Callable[..., Scheduler],
    clock: Clock,
    broker: Any,
    key_prefix: str,
) -> None:
    """kombu's ``global_keyprefix`` prefixes every key it writes: the batch path's pipeline
    must write the same keys, not the bare queue names."""
    shop.conf.broker_transport_options = {"global_keyprefix": f"{key_prefix}-q-global:"}
    beat = schedulers(clock)
    beat.tick()
    assert beat.leadership.lease.leader
    (batch, _), (single, _) = publish_both_ways(beat, broker.client, key_prefix, ("after",))
    assert sum(map(len, batch.values())) == 2 * len(beat.entries)
    assert all(key.startswith(f"{key_prefix}-q-global:{key_prefix}-q") for key in batch)
    assert sorted(batch) == sorted(single)
    for key, messages in single.items():
        assert [(m["headers"], m["body"]) for m in batch[key]] == [
            (m["headers"], m["body"]) for m in messages
        ], key
