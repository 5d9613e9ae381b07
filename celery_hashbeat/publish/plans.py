"""What ``apply_async`` works out from a beat entry before it builds a message, worked out once.

``Task.apply_async`` and ``Celery.send_task`` under it merge the task's own options, route the
task (``task_routes``, ``queue``, ``exchange``, ``routing_key``), pick the serializer, compression
and delivery mode, and split the options into message properties and publish settings, for every
message, though for a beat entry the answer is the same every slot. A ``Plan`` is that answer for
one entry, made by the same Celery calls where Celery has one (``Router.route``, the task's
``_get_exec_options`` and ``shadow_name``); ``bulk`` builds each slot's message from it with
Celery's ``create_task_message``. An entry this module does not know how to plan (an option it does
not handle, a lazy argument, an ``expires`` date) gets no plan, and goes through ``apply_async``.
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import celery
from kombu.common import Broadcast

from celery_hashbeat.publish.message import slot_arguments

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.entries.entry import Entry

#: What ``send_task`` puts in the ``ignore_result`` header of a task it does not know when the
#: caller says nothing: False up to Celery 5.6, None from 5.7 (checked against each release's
#: ``Celery.send_task``), so an unregistered task's message matches apply_async's byte for byte.
SEND_TASK_IGNORE_RESULT: bool | None = None if celery.VERSION >= (5, 7) else False

#: Whether ``before_task_publish`` receives the retry policy merged with the app's
#: ``task_publish_retry_policy`` (Celery 5.7) or as the caller gave it (up to 5.6, None when
#: none was given): each release's ``AMQP.send_task_message``, checked.
SIGNALLED_POLICY_MERGED = celery.VERSION >= (5, 7)

#: Entry options a plan handles as ``apply_async`` does; any other sends the entry's slots
#: through ``apply_async`` itself.
KNOWN_OPTIONS = frozenset(
    {
        "queue",
        "exchange",
        "exchange_type",
        "routing_key",
        "priority",
        "delivery_mode",
        "serializer",
        "compression",
        "expires",
        "headers",
        "time_limit",
        "soft_time_limit",
        "ignore_result",
        "retry",
        "retry_policy",
    }
)

#: Options that are publish settings, neither message properties nor routing.
_SENDING = ("event_dispatcher", "retry", "retry_policy", "timeout", "confirm_timeout")


class Destination(NamedTuple):
    """Where a message goes, as Celery's ``send_task_message`` resolves it."""

    exchange: Any
    routing_key: str | None
    declare: list[Any]
    delivery_mode: Any


class Defaults(NamedTuple):
    """The app's publish settings a plan falls back on, read once (``app.conf`` is slow)."""

    serializer: str
    compression: str | None
    delivery_mode: Any
    routing_key: str | None
    retry_policy: dict[str, Any]

    @classmethod
    def of(cls, app: Celery) -> Defaults:
        conf = app.conf
        return cls(
            conf.task_serializer,
            conf.task_compression,
            conf.task_default_delivery_mode,
            conf.task_default_routing_key,
            dict(conf.task_publish_retry_policy),
        )


@dataclass(eq=False, slots=True)
class Plan:
    """What every slot of one entry shares: where its messages go and how they are encoded."""

    entry: tuple[object, ...]  # the entry's task, args, kwargs and options, to notice a change
    args: Any
    kwargs: dict[str, Any]
    shadow: str | None
    ignore_result: bool | None
    expires: float | None
    time_limit: float | None
    soft_time_limit: float | None
    destination: Destination
    serializer: str
    compression: str | None
    timeout: float | None
    confirm_timeout: float | None
    properties: dict[str, Any]  # the options left: message properties (priority...)
    #: What ``before_task_publish`` receives as ``retry_policy``: see SIGNALLED_POLICY_MERGED.
    signalled_retry_policy: dict[str, Any] | None
    reprs: tuple[str, str] | None = None  # argsrepr and kwargsrepr, from the first message
    encoded: tuple[str, str, Any] | None = None  # the body serialised, from the first message
    stencil: Any = None  # the transport's copy of a message to make the next ones from

    def current(self, entry: Entry) -> bool:
        """Whether the entry is still the one this plan was made for (asked every slot)."""
        task, args, kwargs, options = self.entry
        return (
            task is entry.task
            and args is entry.args
            and kwargs is entry.kwargs
            and options is entry.options
        )


class Built(NamedTuple):
    """One slot's message as ``create_task_message`` built it, for an output to publish."""

    plan: Plan
    body: Any
    encoded: tuple[str, str, Any] | None  # the body serialised, if it is the plan's every time
    headers: dict[str, Any]
    properties: dict[str, Any]


def identity(entry: Entry) -> tuple[object, ...]:
    return (entry.task, entry.args, entry.kwargs, entry.options)


def plannable(entry: Entry) -> bool:
    """Whether a plan can stand for ``apply_async`` for this entry at all: not for lazy
    arguments, options it does not handle, or Celery's publish retry turned back on (it
    retries one message, not a batch)."""
    options = entry.options
    return not entry.lazy and KNOWN_OPTIONS.issuperset(options) and not options.get("retry")


def make_plan(app: Celery, entry: Entry, defaults: Defaults) -> Plan | None:
    """The entry's plan, or None if only ``apply_async`` can send it; raises what
    ``apply_async`` would raise for an entry that can never be sent."""
    args, kwargs = slot_arguments(entry)
    options = {key: value for key, value in entry.options.items() if key != "headers"}
    task: Any = app.tasks.get(entry.task)
    shadow = None
    if task is not None:
        if task.__v2_compat__ or getattr(task, "_dump_pydantic_arguments", None) is not None:
            return None
        if task.soft_time_limit and task.time_limit and task.soft_time_limit > task.time_limit:
            raise ValueError("soft_time_limit must be less than or equal to time_limit")
        if task.typing:
            task.__header__(*args, **kwargs)  # the TypeError apply_async raises
        shadow = task.shadow_name(args, kwargs, {"retry": False, **options})
        options = {**task._get_exec_options(), **options}
        options.setdefault("ignore_result", task.ignore_result)
    limits = (options.pop("time_limit", None), options.pop("soft_time_limit", None))
    expires = options.pop("expires", None)
    if expires is not None and not isinstance(expires, Real):
        return None  # a date: Celery's own parsing of it decides
    ignore_result = options.pop("ignore_result", SEND_TASK_IGNORE_RESULT)
    router: Any = app.amqp.router
    routed = router.route(options, entry.task, args, kwargs, task)
    destination = destination_of(app, routed, defaults)
    serializer = routed.pop("serializer", None) or defaults.serializer
    compression = routed.pop("compression", None) or defaults.compression
    retry_policy = routed.get("retry_policy")
    # The app's own policy, shared by every plan that does not change it.
    merged = {**defaults.retry_policy, **retry_policy} if retry_policy else defaults.retry_policy
    sending = {key: routed.pop(key, None) for key in _SENDING}
    return Plan(
        entry=identity(entry),
        args=args,
        kwargs=kwargs,
        shadow=shadow,
        ignore_result=ignore_result,
        expires=cast("float | None", expires),
        time_limit=limits[0],
        soft_time_limit=limits[1],
        destination=destination,
        serializer=serializer,
        compression=compression,
        timeout=sending["timeout"],
        confirm_timeout=sending["confirm_timeout"],
        properties=routed,
        signalled_retry_policy=merged if SIGNALLED_POLICY_MERGED else retry_policy,
    )


def destination_of(app: Celery, routed: dict[str, Any], defaults: Defaults) -> Destination:
    """Take the routing options out of ``routed`` and resolve them to an exchange, a routing
    key, the queue to declare and the delivery mode, with the app's defaults."""
    amqp = app.amqp
    queue = routed.pop("queue", None)
    exchange = routed.pop("exchange", None)
    routing_key = routed.pop("routing_key", None)
    exchange_type = routed.pop("exchange_type", None)
    delivery_mode = routed.pop("delivery_mode", None)
    queue_name = queue
    if queue is None and exchange is None:
        queue = amqp.default_queue
    if isinstance(queue, str):
        queue_name, queue = queue, amqp.queues[queue]
    elif queue is not None:
        queue_name = queue.name
    queue_exchange: Any = getattr(queue, "exchange", None)
    if delivery_mode is None:
        delivery_mode = getattr(queue_exchange, "delivery_mode", None)
        delivery_mode = delivery_mode or defaults.delivery_mode
    if exchange_type is None:
        exchange_type = getattr(queue_exchange, "type", "direct")
    if exchange_type == "direct" and (not exchange or not routing_key):
        # A direct exchange is published to as the default exchange, keyed by queue name.
        exchange, routing_key = "", queue_name
    elif exchange is None:
        exchange = queue_exchange.name or amqp.default_exchange
        routing_key = routing_key or queue.routing_key or defaults.routing_key
    declare = [queue] if queue is not None and not isinstance(queue, Broadcast) else []
    return Destination(exchange, routing_key, declare, delivery_mode)
