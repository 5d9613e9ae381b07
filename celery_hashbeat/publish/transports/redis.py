"""A chunk of task messages for kombu's Redis transport, sent in one pipeline round trip.

kombu (5.7 and later) lets a Redis channel hand the commands that deliver a message (``LPUSH`` to
the queue's list, ``PUBLISH`` for fanout, ``PEXPIRE`` for queues with ``x-expires``) to a collector
instead of running them, through ``basic_publish(..., _publish_batch=collector)``: the message is
encoded and routed by kombu itself. This module collects them, sends a chunk as one pipeline
(consecutive pushes to one list as one ``LPUSH``, which stores them in the same order) in one
write of Redis's protocol on a connection of the channel's pool, and says per message whether the
broker took it. That write is packed as the messages of a slot are made ahead of it
(``prepare``), and sent at the slot only if exactly those messages are sent.
(A channel with a ``global_keyprefix`` goes through kombu's pipeline, which prefixes the keys.)

Most of a message's cost is building it, and every slot of an entry builds almost the same one:
the first slot's commands are kept as a ``Stencil``, and a later slot's are the stencil's with the
task id, the ``hashbeat_slot`` header and kombu's delivery tag replaced (strings that occur nowhere
else in the message: the stencil is not made otherwise). A test compares such messages with
``apply_async``'s, from the broker.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Any

from celery import signals
from kombu.compression import compress
from kombu.entity import Exchange, maybe_delivery_mode
from kombu.serialization import dumps
from redis.connection import ConnectionPool
from redis.exceptions import ResponseError

from celery_hashbeat.publish.batch import MayHaveGone
from celery_hashbeat.publish.message import (
    COMPRESSION_HEADER,
    SLOT_HEADER,
    TASK_ID_HEADER,
    unique_uuid,
)
from celery_hashbeat.publish.plans import Built, Plan
from celery_hashbeat.publish.transports.stencil import signal_for

#: The commands kombu hands over, and which of them deliver a message (the others only tend
#: the queue, such as ``pexpire``).
DELIVERING = frozenset({"lpush", "publish"})

#: What ``ConnectionPool.get_connection`` is given: redis-py before 5.3 wants a command's name,
#: later ones warn about it.
_COMMAND_NAME: tuple[str, ...] = (
    ("LPUSH",)
    if inspect.signature(ConnectionPool.get_connection).parameters["command_name"].default
    is inspect.Parameter.empty
    else ()
)


class Refused(Exception):  # noqa: N818 - the broker's answer, not a failure of this code
    """The broker answered a message's command with an error: it did not take the message."""


class PartlyTaken(MayHaveGone):
    """The broker took some of a message's commands (a fanout to several topics) and refused
    others: the message may have been delivered."""


Command = tuple[str, tuple[Any, ...]]


class _Collector:
    """What kombu's Redis channel hands its commands to (the ``_publish_batch`` protocol)."""

    def __init__(self) -> None:
        self.commands: list[Command] = []

    def add(self, name: str, *args: Any) -> None:
        self.commands.append((name, args))


#: A string argument of a stencil's command that held some of the three strings: its position,
#: its text cut into pieces with an empty place where each of them stood, and per place, which
#: of (task id, slot, delivery tag) goes there.
Hole = tuple[int, tuple[str, ...], tuple[tuple[int, int], ...]]


@dataclass(frozen=True, slots=True)
class Stencil:
    """A slot's Redis commands, from which another slot's are made by putting three strings in
    the holes they left: the task id, the slot and kombu's delivery tag."""

    reply_to: str  # the publishing thread's, as Celery sets it: a stencil is per thread
    task_id: str
    #: Each command's name, its arguments and its holes.
    commands: tuple[tuple[str, tuple[Any, ...], tuple[Hole, ...]], ...]
    #: The message's headers and body, for after_task_publish; kept only while it has
    #: receivers, since they take as much memory as the message itself.
    signal: tuple[dict[str, Any], Any] | None

    @classmethod
    def make(
        cls,
        reply_to: str,
        headers: dict[str, Any],
        tag: str,
        commands: list[Command],
        signal: tuple[dict[str, Any], Any] | None,
    ) -> Stencil | None:
        task_id = headers[TASK_ID_HEADER]
        slot = json.dumps(headers[SLOT_HEADER])
        tag = json.dumps(tag)
        texts = [arg for _, args in commands for arg in args if isinstance(arg, str)]
        messages = [text for text in texts if task_id in text]
        if not messages or any(m.count(slot) != 1 or m.count(tag) != 1 for m in messages):
            return None  # the slot's text occurs in the message elsewhere: no stencil
        if any(slot in text or tag in text for text in texts if text not in messages):
            return None

        def holes(args: tuple[Any, ...]) -> tuple[Hole, ...]:
            made = []
            for position, arg in enumerate(args):
                if isinstance(arg, str) and task_id in arg:
                    made.append((position, *_template(arg, (task_id, slot, tag))))
            return tuple(made)

        stencil = tuple((name, args, holes(args)) for name, args in commands)
        return cls(reply_to, task_id, stencil, signal)

    def commands_for(self, task_id: str, when: str) -> list[Command]:
        # The three are plain ASCII (a uuid5, an ISO 8601 instant, a uuid4): quoted, they are
        # their JSON text, as json.dumps would write it.
        values = (task_id, f'"{when}"', f'"{unique_uuid()}"')
        made: list[Command] = []
        for name, args, holes in self.commands:
            if not holes:
                made.append((name, args))
                continue
            filled = list(args)
            for position, pieces, places in holes:
                text = list(pieces)
                for place, kind in places:
                    text[place] = values[kind]
                filled[position] = "".join(text)  # one copy of the message, nothing parsed
            made.append((name, tuple(filled)))
        return made

    def signal_for(self, task_id: str, when: str) -> tuple[dict[str, Any], Any]:
        """The headers and body of the message ``commands_for`` makes, for
        ``after_task_publish``."""
        return signal_for(self.signal, self.task_id, task_id, when)


class RedisPipeline:
    """Messages buffered for one pipeline on a kombu Redis channel (``BulkSink``'s output)."""

    immediate = False
    answers_later = False  # a pipeline's replies come back as it is sent

    def __init__(self, producer: Any) -> None:
        self.producer = producer
        self._messages: list[list[Command]] = []
        #: The next send's write, packed while its claim was in flight (``prepare``).
        self._prepared: Packed | None = None
        #: Redis's answers to the chunk last sent, until ``answers`` hands them over.
        self._answers: list[BaseException | None] = []

    def encode(self, message: Built) -> list[Command]:
        """Encode the message as ``Producer.publish`` would and collect kombu's commands for it
        (to ``put`` now or later: they name no connection); keep them as the plan's stencil if
        the plan allows one."""
        plan, body, encoded, headers, properties = message
        producer = self.producer
        channel = producer.channel
        to = plan.destination
        properties = dict(properties)
        priority = properties.pop("priority", 0)
        expiration = properties.pop("expiration", None)
        for unused in ("mandatory", "immediate"):  # AMQP flags a Redis channel ignores
            properties.pop(unused, None)
        exchange = to.exchange
        default = exchange if isinstance(exchange, Exchange) else producer.exchange
        properties["delivery_mode"] = maybe_delivery_mode(to.delivery_mode or default.delivery_mode)
        if expiration is not None:
            properties["expiration"] = str(int(expiration * 1000))
        content_type, content_encoding, data = encoded or dumps(body, serializer=plan.serializer)
        if plan.compression:
            data, headers[COMPRESSION_HEADER] = compress(data, plan.compression)
        kombu_message = channel.prepare_message(
            data, priority, content_type, content_encoding, headers, properties
        )
        collector = _Collector()
        name = exchange.name if isinstance(exchange, Exchange) else exchange
        channel.basic_publish(kombu_message, name, to.routing_key, _publish_batch=collector)
        if encoded is not None and plan.expires is None and plan.stencil is None:
            tag = kombu_message["properties"]["delivery_tag"]
            signal = (headers, body) if signals.after_task_publish.receivers else None
            plan.stencil = Stencil.make(
                properties["reply_to"], headers, tag, collector.commands, signal
            )
        return collector.commands

    def fill(self, plan: Plan, task_id: str, when: str, reply_to: str) -> list[Command] | None:
        """Another slot's commands, made from the plan's stencil; None if there is none that
        fits (made on another thread, or without what after_task_publish needs now)."""
        stencil: Stencil | None = plan.stencil
        if stencil is None:
            return None
        if stencil.reply_to != reply_to or (
            stencil.signal is None and signals.after_task_publish.receivers
        ):
            plan.stencil = None  # the next message made in full makes a new one
            return None
        return stencil.commands_for(task_id, when)

    def put(self, commands: list[Command]) -> bool:
        """Buffer a message's commands for the next ``send`` (always possible on Redis)."""
        self._messages.append(commands)
        return True

    def prepare(self, messages: list[list[Command]]) -> None:
        """Pack the write of ``messages`` (made ahead of their slot) for the send at their
        slot, which uses it only if it sends exactly these messages (in any order: every slot
        claimed) and drops it otherwise. Nothing is sent here."""
        self._prepared = None
        channel = self.producer.channel
        if messages and not channel.global_keyprefix:
            self._prepared = Packed.of(messages, channel.pool.get_encoder())

    def send(self) -> None:
        """Send the buffered messages in one pipeline, and keep Redis's answers for ``answers``
        (it gives them at once: nothing is left in the air). Raises if the round trip itself
        failed (then nothing says how much of it the broker ran)."""
        self._answers = self._pipeline()

    def land(self) -> None:
        pass  # a pipeline's answers are read as it is sent

    def answers(self) -> list[BaseException | None]:
        """Per message of the chunk last sent, None if the broker took it, else why not."""
        answers, self._answers = self._answers, []
        return answers

    def _pipeline(self) -> list[BaseException | None]:
        messages, self._messages = self._messages, []
        prepared, self._prepared = self._prepared, None
        if not messages:
            return []
        channel = self.producer.channel
        if channel.global_keyprefix:  # kombu's pipeline prefixes the keys
            grouped = _grouped(messages)
            with channel.conn_or_acquire() as client, client.pipeline(transaction=False) as pipe:
                for name, args, _ in grouped:
                    getattr(pipe, name)(*args)
                results = pipe.execute(raise_on_error=False)
        else:
            # The channel's own pool, as its clients use it: no client made per send.
            pool = channel.pool
            carried = None if prepared is None else prepared.carrying(messages)
            if prepared is None or carried is None:
                prepared = Packed.of(messages, pool.get_encoder())
                carried = prepared.grouped
            grouped = carried
            results = _round_trip(pool, prepared.data, len(grouped))
        taken: set[int] = set()
        refused: dict[int, BaseException] = {}
        for (name, _, owners), result in zip(grouped, results, strict=True):
            if name not in DELIVERING:
                continue
            for index in owners:
                if isinstance(result, BaseException):
                    refused[index] = result
                else:
                    taken.add(index)
        return [_verdict(index in taken, refused.get(index)) for index in range(len(messages))]

    def discard(self) -> None:
        self._messages.clear()
        self._prepared = None


@dataclass(frozen=True, slots=True)
class Packed:
    """A chunk's pipeline as one write in Redis's protocol, with the messages it carries."""

    messages: list[list[Command]]
    grouped: list[tuple[str, list[Any], list[int]]]
    data: bytes

    @classmethod
    def of(cls, messages: list[list[Command]], encoder: Any) -> Packed:
        """``messages`` packed with redis-py's ``encoder`` (the pool's), as it would pack them:
        text in the client's encoding, anything else as the encoder makes it."""
        grouped = _grouped(messages)
        parts: list[bytes] = []
        encode, encoding, errors = encoder.encode, encoder.encoding, encoder.encoding_errors
        for name, args, _ in grouped:
            parts.append(b"*%d\r\n$%d\r\n%s\r\n" % (len(args) + 1, len(name), name.encode()))
            for arg in args:
                # A message is text: encoded here, one call rather than the encoder's checks.
                data = arg.encode(encoding, errors) if type(arg) is str else encode(arg)
                parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
        return cls(list(messages), grouped, b"".join(parts))

    def carrying(
        self, messages: list[list[Command]]
    ) -> list[tuple[str, list[Any], list[int]]] | None:
        """This write's commands, each with the messages it carries as places in ``messages``,
        if it carries exactly ``messages`` (the very same, in any order); else None."""
        if len(messages) != len(self.messages):
            return None
        place = {id(message): at for at, message in enumerate(messages)}
        try:
            moved = [place[id(message)] for message in self.messages]
        except KeyError:
            return None
        return [(name, args, [moved[at] for at in owners]) for name, args, owners in self.grouped]


def _round_trip(pool: Any, data: bytes, replies: int) -> list[Any]:
    """Write ``data`` on a connection of ``pool`` in one go and read its ``replies``: an error
    reply is that command's result; a connection that failed is closed, not reused."""
    connection = pool.get_connection(*_COMMAND_NAME)
    try:
        connection.send_packed_command([data])
        results: list[Any] = []
        for _ in range(replies):
            try:
                results.append(connection.read_response())
            except ResponseError as exc:
                results.append(exc)
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)
    return results


def _template(
    text: str, strings: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[tuple[int, int], ...]]:
    """``text`` cut where each of ``strings`` stood: its pieces, with an empty place for each
    occurrence, and per place which of ``strings`` stood there. The strings do not overlap."""
    found = sorted(
        (start, kind) for kind, string in enumerate(strings) for start in _starts(text, string)
    )
    pieces: list[str] = []
    places: list[tuple[int, int]] = []
    end = 0
    for start, kind in found:
        pieces.append(text[end:start])
        places.append((len(pieces), kind))
        pieces.append("")
        end = start + len(strings[kind])
    pieces.append(text[end:])
    return tuple(pieces), tuple(places)


def _starts(text: str, string: str) -> list[int]:
    """Where ``string`` starts in ``text``, each time."""
    starts, at = [], text.find(string)
    while at >= 0:
        starts.append(at)
        at = text.find(string, at + len(string))
    return starts


def _grouped(messages: list[list[Command]]) -> list[tuple[str, list[Any], list[int]]]:
    """The pipeline's commands, each with the messages it carries: consecutive pushes to one
    list become one ``LPUSH`` with many values, which Redis stores as it would the single ones."""
    grouped: list[tuple[str, list[Any], list[int]]] = []
    for index, commands in enumerate(messages):
        for name, args in commands:
            if name == "lpush" and grouped and grouped[-1][0] == "lpush":
                _, previous, owners = grouped[-1]
                if previous[0] == args[0]:
                    previous.extend(args[1:])
                    owners.append(index)
                    continue
            grouped.append((name, list(args), [index]))
    return grouped


def _verdict(taken: bool, refusal: BaseException | None) -> BaseException | None:
    if refusal is None:
        return None
    if taken:
        return PartlyTaken(f"the broker refused part of a fanout: {refusal}")
    return Refused(f"the broker refused the message: {refusal}")
