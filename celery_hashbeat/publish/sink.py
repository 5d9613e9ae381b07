"""Putting a tick's task messages on the broker together, without ``apply_async`` per message.

``apply_async`` spends most of a publish on work that is the same for every slot of an entry
(see ``plans``) and, on Redis, on one round trip per message. Here each slot's message is made by
Celery's own ``create_task_message`` from the entry's plan and handed to an output: on Redis
(``redis_batch``) kombu's channel encodes it and a chunk goes in one pipeline; on RabbitMQ
(``amqp_batch``) kombu and py-amqp encode it and a chunk's frames go in one write; elsewhere it is
published at once. A later slot of an entry is the first one's encoded message with its own task
id and slot (a stencil), unless a ``before_task_publish`` receiver wants to see the message first.
What a worker receives is the message ``apply_async`` would have sent (a test compares them from
the broker); ``before_task_publish`` fires as each message is built and ``after_task_publish``
once it reached the broker.

An entry without a plan, or an app that sends task events (``task_send_sent_event``), runs tasks
eagerly or listens to the old ``task_sent`` signal goes through ``apply_async`` one by one.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from celery import signals
from celery.app.routes import MapRoute
from celery.backends.base import Backend
from celery.utils.nodenames import anon_nodename
from kombu.serialization import dumps

from celery_hashbeat.publish.message import slot_headers, slot_iso, slot_task_id
from celery_hashbeat.publish.plans import Built, Defaults, Plan, make_plan, plannable
from celery_hashbeat.publish.transports.amqp import AmqpWrites, coalescable
from celery_hashbeat.publish.transports.producer import ProducerOutput
from celery_hashbeat.publish.transports.redis import RedisPipeline

if TYPE_CHECKING:
    from collections.abc import Mapping

    from celery import Celery

    from celery_hashbeat.entries.entry import Entry

#: Transports (kombu's ``driver_type``) the batch path publishes on: Redis sends a chunk in one
#: pipeline; AMQP writes a chunk at once and waits for nothing (unless confirms are on).
BATCH_DRIVERS = ("redis", "amqp")

#: Plans kept at most, each about 2 KB with its stencil (mostly the message itself): enough for
#: bursts of this many entries to be made from stencils; entries beyond it are planned per slot.
PLANS = 20_000

#: Plans of entries gone from the schedule are swept out once at least this many plans were
#: made since the last sweep, and at least as many as that sweep kept (a sweep is one pass).
SWEEP_AFTER = 64


def unsupported(producer: Any) -> str | None:
    """Why the batch path cannot publish on this producer's transport, or None if it can."""
    driver = producer.connection.transport.driver_type
    if driver not in BATCH_DRIVERS:
        return f"does not know the {driver!r} transport (it knows {', '.join(BATCH_DRIVERS)})"
    return None


#: Per message: its plan, task id and slot, and its headers and body for after_task_publish (None
#: and None if it had no receivers when the message was made).
Unsent = tuple[Plan, str, str, dict[str, Any] | None, Any]


class ThreadView(NamedTuple):
    """What Celery keeps per thread and a message needs: asked once per publishing thread
    rather than once per message."""

    reply_to: str  # the app's ``thread_oid``
    #: The result backend's ``on_task_call``, or None where it does nothing (most backends).
    on_task_call: Callable[[Any, str], object] | None


class Ready(NamedTuple):
    """A slot's message made before it was due, for the plan and thread it was made for."""

    slot: int
    plan: Plan
    reply_to: str
    made: Any  # the output's own form (``RedisPipeline.encode``, ``AmqpWrites.encode``)
    unsent: Unsent


def output_for(producer: Any) -> RedisPipeline | AmqpWrites | ProducerOutput:
    """A pipeline where kombu's Redis channel can hand over its commands without retrying them
    (redis-py retries could run a pipeline twice); one write per chunk on py-amqp without
    confirms; else one publish per message."""
    channel = producer.channel
    if hasattr(channel, "create_publish_batch") and producer.supports_batch_publish:
        return RedisPipeline(producer)
    single = ProducerOutput(producer)
    return AmqpWrites(producer, ProducerOutput) if coalescable(producer) else single


class BulkSink:
    """A ``chunked.Sink`` on a Celery app's producer (one per producer)."""

    def __init__(
        self,
        app: Celery,
        producer: Any,
        announce: Callable[[Entry, str, str], None],
        done: Callable[[Entry], None],
        entries: Mapping[str, Entry],
    ) -> None:
        self.app = app
        self.producer = producer
        self._announce = announce
        self._done = done
        #: The schedule's entries, live: a plan is kept only while its entry is in it.
        self._entries = entries
        self._plans: dict[str, Plan] = {}
        #: Plans made since the last sweep of the kept ones, and how many that sweep kept.
        self._made = 0
        self._swept_to = 0
        self._next: Plan | None = None
        self._declared: set[int] = set()
        self._origin_of = (0, "")
        self._channel: Any = None
        #: The messages not yet known sent, in order, for ``after_task_publish``.
        self._unsent: deque[Unsent] = deque()
        #: Per entry, its next slot's message made ahead (``ready``).
        self._ready: dict[str, Ready] = {}
        conf = app.conf
        self._off = bool(conf.task_always_eager or conf.task_send_sent_event)
        self._defaults = Defaults.of(app)
        router: Any = app.amqp.router
        #: Routes that answer the same for the same entry: a plan is kept, not made per slot.
        self._fixed_routes = all(isinstance(r, MapRoute) for r in router.routes or ())
        #: Per thread, its ``ThreadView`` (a thread's own, even where idents are reused).
        self._per_thread = threading.local()

    @cached_property
    def _output(self) -> RedisPipeline | AmqpWrites | ProducerOutput:
        # Asked first after the batch connected, on its thread: it opens the channel.
        return output_for(self.producer)

    def _thread_view(self) -> ThreadView:
        """The calling thread's ``ThreadView``: a publish may move to a new thread (the last one
        left behind on a hung broker)."""
        view: ThreadView | None = getattr(self._per_thread, "view", None)
        if view is None:
            call = self.app.backend.on_task_call
            idle = getattr(call, "__func__", None) is Backend.on_task_call
            view = self._per_thread.view = ThreadView(self.app.thread_oid, None if idle else call)
        return view

    @property
    def kept(self) -> int:
        """How many plans are kept (each as long as its entry lives)."""
        return len(self._plans)

    @property
    def immediate(self) -> bool:
        return self._output.immediate

    @property
    def answers_later(self) -> bool:
        return self._output.answers_later

    def direct(self, entry: Entry) -> bool:
        self._next = None
        if self._off or signals.task_sent.receivers:
            return True
        plan = self._plans.get(entry.name)
        if plan is None or not plan.current(entry):  # a kept plan was plannable when made
            if not plannable(entry):
                return True
            try:
                plan = self._plan(entry)
            except Exception:  # apply_async raises it again, and the slot is dropped as it says
                return True
        self._next = plan
        return plan is None

    def ready(self, entry: Entry, slot: int) -> None:
        """Make the slot's message before it is due, so that only sending it is left at its
        slot: the entry's plan, and the message itself unless a ``before_task_publish``
        receiver must see it as it goes or it carries a time (``expires``) counted from then."""
        if self.direct(entry):
            return
        plan, self._next = self._next, None
        assert plan is not None
        if (
            self._output.immediate
            or plan.expires is not None
            or signals.before_task_publish.receivers
        ):
            return
        task_id, when = slot_task_id(entry.name, slot), slot_iso(slot)
        reply_to = self._thread_view().reply_to
        self._declare(plan.destination.declare)  # routed now: its queue's bindings must exist
        made, unsent = self._make(entry, plan, task_id, when, reply_to)
        self._ready[entry.name] = Ready(slot, plan, reply_to, made, unsent)

    def warm(self, entry: Entry, slot: int) -> bool:
        """As a standby, make the entry's plan and its message's stencil (for any of its slots,
        here ``slot``) and keep nothing else, so that the first burst after a take-over only
        fills stencils in; whether there was something to make. Nothing is made while a
        ``before_task_publish`` receiver would see a message that never goes."""
        if signals.before_task_publish.receivers or self.direct(entry):
            return False
        plan, self._next = self._next, None
        assert plan is not None
        if plan.stencil is not None or self._output.immediate or plan.expires is not None:
            return False
        reply_to = self._thread_view().reply_to
        self._make(entry, plan, slot_task_id(entry.name, slot), slot_iso(slot), reply_to)
        return True

    def prepare(self, slots: list[tuple[Entry, int]]) -> None:
        """Pack the write of the messages just made ahead for ``slots`` (Redis only:
        ``RedisPipeline.prepare``), if each has one. The send at their instant uses it only if
        it sends exactly those messages, every slot claimed; otherwise it is dropped."""
        output = self._output
        if not isinstance(output, RedisPipeline):
            return
        ready = self._ready
        made: list[Any] = []
        for entry, slot in slots:
            found = ready.get(entry.name)
            if found is None or found.slot != slot:
                made = []  # made at its stage: no write to pack
                break
            made.append(found.made)
        output.prepare(made)

    def forget_ready(self, before: int) -> None:
        """Drop the messages made ahead for slots before ``before`` that were never staged (a
        slot claimed by another beat, an entry paused or removed)."""
        stale = [name for name, ready in self._ready.items() if ready.slot < before]
        for name in stale:
            del self._ready[name]

    def stage(self, entry: Entry, slot: int) -> None:
        plan, self._next = self._next, None
        assert plan is not None, "stage() follows direct() for the same entry"
        thread = self._thread_view()
        reply_to = thread.reply_to
        ready = self._ready.pop(entry.name, None)
        if ready is not None and (
            ready[:3] != (slot, plan, reply_to)
            or (ready.unsent[3] is None and signals.after_task_publish.receivers)
        ):
            ready = None  # made for another slot, plan or thread, or without what is wanted now
        if ready is None:
            task_id, when = slot_task_id(entry.name, slot), slot_iso(slot)
        else:
            task_id, when = ready.unsent[1:3]
        self._announce(entry, task_id, when)
        if not plan.ignore_result and thread.on_task_call is not None:
            self.land()  # the backend may declare its reply queue
            thread.on_task_call(self.producer, task_id)
        self._declare(plan.destination.declare)
        output = self._output
        if isinstance(output, ProducerOutput):
            built = self._build(entry, plan, task_id, when, reply_to)
            output.publish(built)
            self._unsent.append((plan, task_id, when, built.headers, built.body))
            return
        if ready is not None and output.put(ready.made):
            self._unsent.append(ready.unsent)
            return
        made, unsent = self._make(entry, plan, task_id, when, reply_to)
        output.put(made)
        self._unsent.append(unsent)

    def _make(
        self, entry: Entry, plan: Plan, task_id: str, when: str, reply_to: str
    ) -> tuple[Any, Unsent]:
        """The slot's message for a buffering output, and what ``sent`` needs of it. Without a
        before_task_publish receiver nobody sees (or changes) the message before it goes:
        another slot's, with this slot's strings, is the same message."""
        output = cast("RedisPipeline | AmqpWrites", self._output)
        made = None
        if not signals.before_task_publish.receivers:
            made = output.fill(plan, task_id, when, reply_to)
        if made is not None:
            if signals.after_task_publish.receivers:  # what they get, made now too
                return made, (plan, task_id, when, *plan.stencil.signal_for(task_id, when))
            return made, (plan, task_id, when, None, None)
        built = self._build(entry, plan, task_id, when, reply_to)
        return output.encode(built), (plan, task_id, when, built.headers, built.body)

    def _build(self, entry: Entry, plan: Plan, task_id: str, when: str, reply_to: str) -> Built:
        """The slot's message made in full by Celery's ``create_task_message``, as
        ``before_task_publish`` receivers see (and may change) it."""
        headers, properties, body, _ = self.app.amqp.create_task_message(
            task_id,
            entry.task,
            plan.args,
            plan.kwargs,
            expires=plan.expires,
            reply_to=reply_to,
            time_limit=plan.time_limit,
            soft_time_limit=plan.soft_time_limit,
            shadow=plan.shadow,
            ignore_result=plan.ignore_result,
            origin=self._origin(),
            argsrepr=plan.reprs and plan.reprs[0],
            kwargsrepr=plan.reprs and plan.reprs[1],
        )
        if plan.reprs is None:
            plan.reprs = (headers["argsrepr"], headers["kwargsrepr"])
        headers.update(slot_headers(entry, when))
        properties.update(plan.properties)
        if plan.expires is not None:
            properties["expiration"] = max(plan.expires, 0)
        to = plan.destination
        signals.before_task_publish.send(
            sender=entry.task,
            body=body,
            exchange=to.exchange,
            routing_key=to.routing_key,
            declare=to.declare,
            headers=headers,
            properties=properties,
            retry_policy=plan.signalled_retry_policy,
        )
        if signals.before_task_publish.receivers:
            encoded = None  # a receiver may have changed the body: encode it as it is now
        elif plan.encoded is None:
            encoded = plan.encoded = dumps(body, plan.serializer)
        else:
            encoded = plan.encoded  # the body is the same every slot: encoded once
        return Built(plan, body, encoded, headers, properties)

    def send(self) -> None:
        try:
            self._output.send()
        except BaseException:
            self._unsent.clear()
            raise

    def answers(self) -> list[BaseException | None]:
        try:
            return self._output.answers()
        except BaseException:
            self._unsent.clear()
            raise

    def land(self) -> None:
        """Read the broker's answers to the chunk in the air on this connection (if any) before
        something else talks to the broker on it: only the reader of an answer sees it."""
        self._output.land()

    def discard(self) -> None:
        self._unsent.clear()
        self._output.discard()

    def sent(self, entry: Entry, slot: int) -> None:
        plan, _, _, headers, body = self._unsent.popleft()
        if headers is not None and signals.after_task_publish.receivers:
            to = plan.destination
            signals.after_task_publish.send(
                sender=entry.task,
                body=body,
                headers=headers,
                exchange=to.exchange,
                routing_key=to.routing_key,
            )
        self._done(entry)

    def unsent(self, entry: Entry, slot: int) -> None:
        """The slot's message did not go out: forget it."""
        self._unsent.popleft()

    def _origin(self) -> str:
        """Celery's ``origin`` header (``gen<pid>@<host>``), asked of Celery once per process
        rather than once per message (it asks the system for the host name each time)."""
        pid = os.getpid()
        if self._origin_of[0] != pid:
            self._origin_of = (pid, anon_nodename())
        return self._origin_of[1]

    def _declare(self, entities: list[Any]) -> None:
        """Declare each queue once per channel, as kombu's ``maybe_declare`` does, without its
        cost per message."""
        channel = self.producer.channel
        if channel is not self._channel:
            self._channel = channel
            self._declared.clear()
        for entity in entities:
            if id(entity) not in self._declared:
                self.land()
                self.producer.maybe_declare(entity)
                self._declared.add(id(entity))

    def _plan(self, entry: Entry) -> Plan | None:
        """A new plan for the entry, kept if there is room and its routes are fixed."""
        plan = make_plan(self.app, entry, self._defaults)
        self._made += 1
        if self._made >= max(SWEEP_AFTER, self._swept_to):
            self._sweep()
        room = entry.name in self._plans or len(self._plans) < PLANS
        if plan is not None and self._fixed_routes and room:
            self._plans[entry.name] = plan
        return plan

    def _sweep(self) -> None:
        """Forget the plans whose entry left the schedule or changed since: a plan lives as
        long as its entry, and the plans kept never number more than twice the entries (plus
        ``SWEEP_AFTER``)."""
        self._made = 0
        entries = self._entries
        stale = [
            name
            for name, plan in self._plans.items()
            if (entry := entries.get(name)) is None or not plan.current(entry)
        ]
        for name in stale:
            del self._plans[name]
        self._swept_to = len(self._plans)
