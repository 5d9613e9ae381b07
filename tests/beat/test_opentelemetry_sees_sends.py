"""Issue 23, item 16, with OpenTelemetry's Celery instrumentation (it hooks Celery's publish
signals): every slot a beat sends makes a producer span named for its task, with the slot's
task id, and the trace context reaches the broker in the message's headers, on the batch path
(nothing hooked) and through a hooked ``apply_entry`` alike."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery, _state

from celery_hashbeat import Scheduler, hashcron
from celery_hashbeat.publish.message import slot_task_id
from tests.support.beat_fixtures import START, Broker, Clock

pytest.importorskip(
    "opentelemetry.instrumentation.celery",
    reason="opentelemetry-instrumentation-celery is not installed (extra [test] has it)",
)

from opentelemetry.instrumentation.celery import CeleryInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

NAMES = ["a", "b"]
SLOTS = [START + 60_000, START + 120_000]


def tick() -> None:
    """The task the entries send: known to the app, as a beat that imports its tasks."""


@pytest.fixture
def spans(app: Celery) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # The instrumentation finds a published task by name in the current app.
    previous = _state.get_current_app()
    app.set_current()
    app.task(name="shop.tick", shared=False)(tick)
    app.conf.beat_schedule = {
        name: {"task": "shop.tick", "schedule": hashcron("* * * * *")} for name in NAMES
    }
    instrumentor = CeleryInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()
        previous.set_current()


class OwnApplyEntry(Scheduler):
    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        super().apply_entry(entry, producer=producer)


@pytest.mark.parametrize("cls", [Scheduler, OwnApplyEntry], ids=["batch path", "hooked"])
def test_every_slot_makes_a_producer_span_and_carries_its_trace(
    app: Celery,
    clock: Clock,
    broker: Broker,
    spans: InMemorySpanExporter,
    cls: type[Scheduler],
) -> None:
    beat = cls(app, lazy=True)
    beat.clock = clock
    beat.setup_schedule()
    try:
        beat.tick()
        for _ in SLOTS:
            clock.advance(60)
            for _ in range(3):
                beat.tick()
        batched = beat.publisher.sink is not None
    finally:
        beat.close()
    assert batched is (cls is Scheduler)
    expected = sorted(slot_task_id(name, slot) for name in NAMES for slot in SLOTS)
    published = [s for s in spans.get_finished_spans() if s.name == "apply_async/shop.tick"]
    assert sorted(str((s.attributes or {})["messaging.message.id"]) for s in published) == (
        expected
    )
    messages = broker.headers()
    assert sorted(h["id"] for h in messages) == expected
    # Each message carries the trace context of its own producer span.
    span_ids = {format(s.context.span_id, "016x") for s in published if s.context is not None}
    assert {h["traceparent"].split("-")[2] for h in messages} == span_ids
