"""Issue 23, item 16: Celery's send methods (``apply_entry``, ``apply_async``, ``send_task``)
see every scheduled slot once a subclass overrides one or a tool patches one, with the slot's
own task id and headers; with none hooked the batch path publishes, as before.

Sentry's own patch is tested in a fresh interpreter (tests/beat/test_sentry_crons.py): it
patches Celery for the rest of the process."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery, beat
from kombu.exceptions import OperationalError

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.publish.message import slot_task_id
from tests.support.beat_fixtures import START, Broker, Clock, iso

NAMES = ["a", "b", "c"]
MINUTE_S = 60.0


def every_minute(app: Celery) -> None:
    app.conf.beat_schedule = {
        name: {"task": "shop.tick", "schedule": hashcron("* * * * *"), "args": [name]}
        for name in NAMES
    }


def slots_of(beat_: Scheduler, clock: Clock, minutes: int) -> list[int]:
    """Tick through ``minutes`` minutes of slots; the slots (epoch ms) each entry had."""
    beat_.tick()
    seen = []
    for _ in range(minutes):
        clock.advance(MINUTE_S)
        for _ in range(3):  # a lease call or a poll may fall due meanwhile
            beat_.tick()
        seen.append(int(clock.now * 1000))
    return seen


def make(cls: type[Scheduler], app: Celery, clock: Clock) -> Any:
    scheduler = cls(app, lazy=True)
    scheduler.clock = clock
    scheduler.setup_schedule()
    return scheduler


class OwnApplyEntry(Scheduler):
    """A subclass that overrides ``apply_entry``, as users of celery.beat write them."""

    seen: list[tuple[str, str, dict[str, Any]]]

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        self.seen.append((entry.name, entry.options["task_id"], dict(entry.options["headers"])))
        super().apply_entry(entry, producer=producer)


@pytest.fixture
def own_apply_entry(app: Celery, clock: Clock) -> Iterator[OwnApplyEntry]:
    every_minute(app)
    scheduler = make(OwnApplyEntry, app, clock)
    scheduler.seen = []
    yield scheduler
    scheduler.close()


def test_a_subclass_overriding_apply_entry_sees_every_slot_with_its_task_id(
    own_apply_entry: OwnApplyEntry, clock: Clock, broker: Broker
) -> None:
    slots = slots_of(own_apply_entry, clock, 2)
    assert own_apply_entry.publisher.sink is None  # the batch path is off while it is hooked
    seen = sorted(own_apply_entry.seen)
    expected = sorted(
        (name, slot_task_id(name, slot)) for name in NAMES for slot in slots if slot > START
    )
    assert [(name, task_id) for name, task_id, _ in seen] == expected
    for name, _, headers in seen:
        assert headers["hashbeat_entry"] == name
        assert headers["hashbeat_slot"] in {iso(slot) for slot in slots}
    # What reached the broker: each slot once, with the slot's task id and headers.
    messages = broker.headers()
    assert sorted((h["hashbeat_entry"], h["id"]) for h in messages) == expected
    assert all(h["celery_beat_task"] is True for h in messages)


def test_the_entry_itself_is_left_as_it_was(own_apply_entry: OwnApplyEntry, clock: Clock) -> None:
    """The slot's task id and headers are the slot's: the schedule's entry keeps its options,
    and ``apply_async``'s reserve step does not replace it."""
    before = {name: own_apply_entry.entries[name] for name in NAMES}
    slots_of(own_apply_entry, clock, 1)
    for name in NAMES:
        entry = own_apply_entry.entries[name]
        assert entry is before[name]
        assert "task_id" not in entry.options
        assert "headers" not in entry.options
        assert entry.total_run_count == 1


class FlakyApplyAsync(Scheduler):
    """An ``apply_async`` override whose first call finds the broker refusing connections."""

    calls: list[str]

    def apply_async(
        self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        self.calls.append(entry.options["task_id"])
        if len(self.calls) == 1:
            raise OperationalError("refused") from ConnectionRefusedError(111, "refused")
        return super().apply_async(entry, producer, advance, **kwargs)


def test_a_hook_that_fails_fails_the_slot_which_is_given_back_and_sent_once(
    app: Celery, clock: Clock, broker: Broker
) -> None:
    app.conf.beat_schedule = {"a": {"task": "shop.tick", "schedule": hashcron("* * * * *")}}
    scheduler = make(FlakyApplyAsync, app, clock)
    scheduler.calls = []
    try:
        scheduler.tick()
        clock.advance(MINUTE_S)
        scheduler.tick()  # the hook raises: the claim is given back
        assert broker.headers() == []
        clock.advance(2)  # the retry, a second later
        for _ in range(3):
            scheduler.tick()
    finally:
        scheduler.close()
    slot = START + 60_000
    assert scheduler.calls == [slot_task_id("a", slot)] * 2
    assert [(h["hashbeat_entry"], h["id"]) for h in broker.headers()] == [
        ("a", slot_task_id("a", slot))
    ]


def test_a_tool_patching_celery_apply_entry_later_is_seen_at_the_next_tick(
    app: Celery,
    schedulers: Any,
    clock: Clock,
    broker: Broker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As Sentry does: ``celery.beat.Scheduler.apply_entry`` wrapped, here after the beat
    started; it adds a header, which reaches the broker."""
    every_minute(app)
    scheduler = schedulers(clock)
    slots_of(scheduler, clock, 1)
    assert scheduler.publisher.sink is not None  # nothing hooked: the batch path
    original = beat.Scheduler.apply_entry
    wrapped: list[str] = []

    def patched(self: Any, entry: Any, producer: Any = None) -> Any:
        wrapped.append(entry.name)
        entry.options.setdefault("headers", {})["tool"] = "seen"
        return original(self, entry, producer=producer)

    monkeypatch.setattr(beat.Scheduler, "apply_entry", patched)
    with caplog.at_level(logging.INFO, logger="celery_hashbeat"):
        slots_of(scheduler, clock, 1)
    said = [r.getMessage() for r in caplog.records if "Scheduler.apply_entry" in r.getMessage()]
    assert len(said) == 1, said  # once, when it changed
    assert said[0].startswith(
        "beat: Scheduler.apply_entry is overridden or patched (apply_entry: "
        f"{__name__}.test_a_tool_patching_celery_apply_entry_later_is_seen_at_the_next_tick."
        "<locals>.patched): every slot goes through it, one message at a time"
    )
    assert sorted(wrapped) == NAMES
    tagged = [h["hashbeat_entry"] for h in broker.headers() if h.get("tool") == "seen"]
    assert sorted(tagged) == NAMES
    monkeypatch.undo()  # unpatched: back on the batch path
    slots_of(scheduler, clock, 1)
    assert scheduler.publisher.sink is not None
    assert len(broker.headers()) == 3 * len(NAMES)


class OwnSendTask(Scheduler):
    """A subclass overriding ``send_task``: Celery calls it for tasks the beat does not know."""

    sent: list[str]

    def send_task(self, *args: Any, **kwargs: Any) -> Any:
        self.sent.append(kwargs["task_id"])
        return super().send_task(*args, **kwargs)


def test_a_subclass_overriding_send_task_sees_the_slots_of_unknown_tasks(
    app: Celery, clock: Clock, broker: Broker
) -> None:
    every_minute(app)
    scheduler = make(OwnSendTask, app, clock)
    scheduler.sent = []
    try:
        slots = slots_of(scheduler, clock, 1)
    finally:
        scheduler.close()
    expected = sorted(slot_task_id(name, slots[0]) for name in NAMES)
    assert sorted(scheduler.sent) == expected
    assert sorted(h["id"] for h in broker.headers()) == expected


def test_a_tool_patching_this_schedulers_apply_async_sees_every_slot(
    app: Celery,
    schedulers: Any,
    clock: Clock,
    broker: Broker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A patch on celery_hashbeat's own class counts as one on Celery's does."""
    every_minute(app)
    original = Scheduler.apply_async
    wrapped: list[str] = []

    def patched(self: Any, entry: Any, *args: Any, **kwargs: Any) -> Any:
        wrapped.append(entry.options["task_id"])
        return original(self, entry, *args, **kwargs)

    monkeypatch.setattr(Scheduler, "apply_async", patched)
    scheduler = schedulers(clock)
    slots = slots_of(scheduler, clock, 1)
    expected = sorted(slot_task_id(name, slots[0]) for name in NAMES)
    assert sorted(wrapped) == expected
    assert sorted(h["id"] for h in broker.headers()) == expected
