"""A chunk of task messages for RabbitMQ (py-amqp), written to the socket in one go.

py-amqp encodes each message's frames in Python and writes them with a system call of its own,
which is most of what a publish costs once Celery's message building is out of the way. Here a
message is published as usual (kombu's ``Producer.publish``: kombu and py-amqp encode it), but its
frames are kept as they are handed to the transport, and a chunk's are written with one
``sendall``. AMQP needs no answer to a publish, so nothing waits for one.

As on Redis (``redis_batch``), the first slot's frames of an entry are kept as a ``FrameStencil``,
and a later slot's are those bytes with the task id and ``hashbeat_slot`` replaced: strings of the
same length, so every frame keeps its size (the stencil is not made if they occur elsewhere).

With publisher confirms on (``confirm_publish``) py-amqp waits for the broker's confirm of each
message as it publishes it, which needs the message on the wire at once: there messages go one at
a time through ``bulk.ProducerOutput``, each confirmed before the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import amqp
from celery import signals

from celery_hashbeat.redis_batch import Signal, signal_for

if TYPE_CHECKING:
    from celery_hashbeat.bulk import ProducerOutput
    from celery_hashbeat.plans import Built, Plan


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
        task_id, slot = headers["id"].encode(), headers["hashbeat_slot"].encode()
        if task_id not in frames or frames.count(slot) != 1:
            return None  # the slot's text occurs in the message elsewhere: no stencil
        return cls(reply_to, channel, task_id, slot, frames, signal)

    def frames_for(self, task_id: str, when: str) -> bytes:
        return self.frames.replace(self.task_id, task_id.encode()).replace(self.slot, when.encode())

    def signal_for(self, task_id: str, when: str) -> Signal:
        return signal_for(self.signal, self.task_id.decode(), task_id, when)


def coalescable(producer: Any) -> bool:
    """Whether this producer's connection is py-amqp's, without confirms, on a transport whose
    writes can be held back (its ``_write``)."""
    connection = producer.connection.connection
    transport = getattr(connection, "transport", None)
    return (
        isinstance(connection, amqp.Connection)
        and not getattr(connection, "confirm_publish", True)
        and callable(getattr(transport, "_write", None))
    )


class AmqpWrites:
    """Messages published through a ``ProducerOutput`` while the socket writes are held back, and
    written together on ``flush`` (``bulk``'s output for RabbitMQ)."""

    immediate = False

    def __init__(self, producer: Any, output: ProducerOutput) -> None:
        self.producer = producer
        self.transport = producer.connection.connection.transport
        self._output = output
        self._frames: list[bytes] = []
        self._messages = 0

    def publish(self, message: Built) -> None:
        plan, body, encoded, headers, properties = message
        transport, frames = self.transport, self._frames
        mark = len(frames)
        write = transport._write
        # py-amqp hands over a view of a buffer it reuses: keep a copy.
        transport._write = lambda data: frames.append(bytes(data))
        try:
            self._output.publish(message)
        except BaseException:
            del frames[mark:]  # no part of a message that failed half-way goes out
            raise
        finally:
            transport._write = write
        self._messages += 1
        if encoded is not None and plan.expires is None and plan.stencil is None:
            signal = (headers, body) if signals.after_task_publish.receivers else None
            sent = b"".join(frames[mark:])
            plan.stencil = FrameStencil.make(
                properties["reply_to"], self._channel(), headers, sent, signal
            )

    def repeat(self, plan: Plan, task_id: str, when: str, reply_to: str) -> FrameStencil | None:
        """Add the frames of another slot made from the plan's stencil, and return it; None if
        there is none that fits (made on another thread or channel, or without what
        after_task_publish needs now)."""
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
        self._frames.append(stencil.frames_for(task_id, when))
        self._messages += 1
        return stencil

    def _channel(self) -> tuple[int, int]:
        channel = self.producer.channel
        return (id(channel.connection), channel.channel_id)

    def flush(self) -> list[BaseException | None]:
        frames, self._frames = self._frames, []
        count, self._messages = self._messages, 0
        if frames:
            self.transport.write(b"".join(frames))
        return [None] * count

    def discard(self) -> None:
        self._frames = []
        self._messages = 0
