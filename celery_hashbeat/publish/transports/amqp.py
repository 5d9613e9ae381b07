"""A chunk of task messages for RabbitMQ (py-amqp), written to the socket in one go.

py-amqp encodes each message's frames in Python and writes them with a system call of its own,
which is most of what a publish costs once Celery's message building is out of the way. Here a
message is published as usual (kombu's ``Producer.publish``: kombu and py-amqp encode it), but its
frames are kept as they are handed to the transport, and a chunk's are written with one
``sendall``. AMQP needs no answer to a publish, so nothing waits for one.

As on Redis (``redis_batch``), the first slot's frames of an entry are kept as a ``FrameStencil``,
and a later slot's are those bytes with the task id and ``hashbeat_slot`` replaced: strings of the
same length, so every frame keeps its size (the stencil is not made if they occur elsewhere).

With publisher confirms on (``confirm_publish``) py-amqp would wait for the broker's answer to
each message as it publishes it. Here a chunk goes on a channel of the batch's own in confirm
mode, written at once as above, and then the broker's answers are read: an ack is a message the
broker took, a nack one it may not have (kept as unknown, never sent twice), and no answer within
``CONFIRM_WAIT`` leaves the whole chunk unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import amqp
from celery import signals
from kombu import Producer

from celery_hashbeat.publish.batch import MayHaveGone
from celery_hashbeat.publish.message import SLOT_HEADER, TASK_ID_HEADER
from celery_hashbeat.publish.transports.stencil import Signal, signal_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from celery_hashbeat.publish.plans import Built, Plan
    from celery_hashbeat.publish.transports.producer import ProducerOutput

#: The longest wait for the broker's next confirm (seconds) before the chunk is given up as
#: unknown; the scheduler leaves a publish behind sooner if it waits longer than its timeout.
CONFIRM_WAIT = 10.0


@dataclass(frozen=True, slots=True)
class FrameStencil:
    """A slot's AMQP frames, from which another slot's are made by replacing two strings."""

    reply_to: str  # the publishing thread's: a stencil is per thread
    channel: tuple[int, int]  # the connection and channel the frames name
    task_id: bytes
    slot: bytes
    frames: bytes
    signal: Signal | None  # headers and body for after_task_publish, while it has receivers

    @classmethod
    def make(
        cls,
        reply_to: str,
        channel: tuple[int, int],
        headers: dict[str, Any],
        frames: bytes,
        signal: Signal | None,
    ) -> FrameStencil | None:
        task_id, slot = headers[TASK_ID_HEADER].encode(), headers[SLOT_HEADER].encode()
        if task_id not in frames or frames.count(slot) != 1:
            return None  # the slot's text occurs in the message elsewhere: no stencil
        return cls(reply_to, channel, task_id, slot, frames, signal)

    def frames_for(self, task_id: str, when: str) -> bytes:
        return self.frames.replace(self.task_id, task_id.encode()).replace(self.slot, when.encode())

    def signal_for(self, task_id: str, when: str) -> Signal:
        return signal_for(self.signal, self.task_id.decode(), task_id, when)


class Frames(NamedTuple):
    """One message's frames, and the (connection, channel) they were made for."""

    channel: tuple[int, int]
    data: bytes


def coalescable(producer: Any) -> bool:
    """Whether this producer's connection is py-amqp's, on a transport whose writes can be held
    back (its ``_write``)."""
    connection = producer.connection.connection
    transport = getattr(connection, "transport", None)
    return isinstance(connection, amqp.Connection) and callable(getattr(transport, "_write", None))


class Confirms:
    """Publisher confirms on a channel of the batch's own, answered per message but waited for
    per chunk: the broker numbers a channel's messages from 1 once it is in confirm mode, and
    acks (or nacks) each, or all up to one at once."""

    def __init__(self, connection: Any) -> None:
        self.channel = connection.channel()
        self.channel.confirm_select()
        # py-amqp's confirming publish waits for each answer: this channel's publishes do not.
        self.channel.basic_publish = self.channel._basic_publish
        self.channel.events["basic_ack"].add(
            lambda tag, multiple: self._answer(tag, multiple, True)
        )
        self.channel.events["basic_nack"].add(
            lambda tag, multiple: self._answer(tag, multiple, False)
        )
        self.sent = 0  # messages published on the channel so far
        self._answered_to = 0  # every message up to this one has its answer
        self._answers: dict[int, bool] = {}

    def _answer(self, tag: int, multiple: bool, taken: bool) -> None:
        for number in range(self._answered_to + 1, tag + 1) if multiple else (tag,):
            self._answers.setdefault(number, taken)
        if multiple:
            self._answered_to = max(self._answered_to, tag)

    def wait(self, connection: Any, count: int) -> list[BaseException | None]:
        """The broker's answer to each of the last ``count`` messages, waiting at most
        ``CONFIRM_WAIT`` seconds for each next one; a nack may have been delivered anyway."""
        first, self.sent = self.sent + 1, self.sent + count
        number = first
        while number <= self.sent:
            if number in self._answers:
                number += 1
            else:
                connection.drain_events(timeout=CONFIRM_WAIT)  # raises if nothing comes
        self._answered_to = max(self._answered_to, self.sent)
        answers = [self._answers.pop(n) for n in range(first, self.sent + 1)]
        return [None if taken else MayHaveGone("the broker nacked it") for taken in answers]


class AmqpWrites:
    """Messages published through a ``ProducerOutput`` while the socket writes are held back, and
    written together on ``flush``; with publisher confirms, on a channel of its own whose
    answers ``flush`` then waits for (``bulk``'s output for RabbitMQ)."""

    immediate = False

    def __init__(self, producer: Any, single: Callable[[Any], ProducerOutput]) -> None:
        self.producer = producer
        self._single = single
        self._frames: list[bytes] = []
        self._messages = 0
        self.transport: Any = None
        self._fresh()

    def _fresh(self) -> None:
        """Follow the producer's connection: a reconnect brings a new transport (and the
        confirms need a channel on it). A chunk ends on the transport it began on."""
        connection = self.producer.connection
        transport = connection.connection.transport
        if self._frames or transport is self.transport:
            return
        self.transport = transport
        self._confirms = Confirms(connection) if connection.connection.confirm_publish else None
        publisher = self.producer
        if self._confirms is not None:
            publisher = Producer(self._confirms.channel, auto_declare=False)
        self._output = self._single(publisher)

    def encode(self, message: Built) -> Frames:
        """Publish the message as usual with the socket writes held back, and return its
        frames (to ``put`` now or later, on the channel they name); keep them as the plan's
        stencil if the plan allows one."""
        self._fresh()
        plan, body, encoded, headers, properties = message
        transport = self.transport
        held: list[bytes] = []
        write = transport._write
        # py-amqp hands over a view of a buffer it reuses: keep a copy.
        transport._write = lambda data: held.append(bytes(data))
        try:
            self._output.publish(message)
        finally:
            transport._write = write
        frames = Frames(self._channel(), b"".join(held))
        if encoded is not None and plan.expires is None and plan.stencil is None:
            signal = (headers, body) if signals.after_task_publish.receivers else None
            plan.stencil = FrameStencil.make(
                properties["reply_to"], frames.channel, headers, frames.data, signal
            )
        return frames

    def fill(self, plan: Plan, task_id: str, when: str, reply_to: str) -> Frames | None:
        """Another slot's frames, made from the plan's stencil; None if there is none that fits
        (made on another thread or channel, or without what after_task_publish needs now)."""
        self._fresh()
        stencil = plan.stencil
        if not isinstance(stencil, FrameStencil):
            return None
        if (
            stencil.reply_to != reply_to
            or stencil.channel != self._channel()
            or (stencil.signal is None and signals.after_task_publish.receivers)
        ):
            plan.stencil = None  # the next message made in full makes a new one
            return None
        return Frames(stencil.channel, stencil.frames_for(task_id, when))

    def put(self, frames: Frames) -> bool:
        """Buffer a message's frames for the next ``flush``; False if they were made for a
        channel this chunk is not on (a reconnect since)."""
        self._fresh()
        if frames.channel != self._channel():
            return False
        self._frames.append(frames.data)
        self._messages += 1
        return True

    def _channel(self) -> tuple[int, int]:
        channel = self._output.producer.channel
        return (id(channel.connection), channel.channel_id)

    def flush(self) -> list[BaseException | None]:
        frames, self._frames = self._frames, []
        count, self._messages = self._messages, 0
        if frames:
            self.transport.write(b"".join(frames))
        if self._confirms is not None and count:
            return self._confirms.wait(self.producer.connection, count)
        return [None] * count

    def discard(self) -> None:
        self._frames = []
        self._messages = 0
