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

A message the broker cannot route to an exchange (one it does not have) makes RabbitMQ close the
channel, and discard whatever else comes on that channel until the client acknowledges the close
(AMQP 0-9-1, Channel.Close). So the broker's answer is read after every chunk: with confirms by
waiting for them, without by a no-op written after the chunk (a ``basic.qos`` that changes
nothing), whose answer comes once every message before it has been handled. The next chunk is
made while the broker handles one, and written only once its answers are read; any other call
that waits on the connection (a declare, a revoke) reads them first (``land``), since an answer
is seen only by the call that reads it. When the channel was closed, the
refusal is put on the message that caused it (the first of the chunk to the exchange the broker
names): that slot is dropped; the ones before it went out (the broker handles a channel's frames
in order); the ones after it surely did not arrive, and are written again on the channel py-amqp
reopens (docs/design.md §15). An exchange found missing is remembered, so later slots to it are
dropped without a write, and a new plan's exchange is looked up (a passive declare, once per
exchange) before its first message goes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import amqp
from amqp import spec
from celery import signals
from kombu import Exchange, Producer

from celery_hashbeat.publish.batch import MayHaveGone
from celery_hashbeat.publish.message import SLOT_HEADER, TASK_ID_HEADER
from celery_hashbeat.publish.transports.refusals import Answer, no_such_exchange, sort_out
from celery_hashbeat.publish.transports.stencil import Signal, signal_for

if TYPE_CHECKING:
    from collections.abc import Callable

    from celery_hashbeat.publish.plans import Built, Plan
    from celery_hashbeat.publish.transports.producer import ProducerOutput

#: The longest wait for the broker's next confirm (seconds) before the chunk is given up as
#: unknown; the scheduler leaves a publish behind sooner if it waits longer than its timeout.
CONFIRM_WAIT = 10.0

#: An exchange found missing is looked up again after this long (seconds): until then its
#: messages are dropped without being written.
MISSING_RECHECK_S = 5.0


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
    """One message's frames, the (connection, channel) they were made for, and the exchange
    they are published to (the name; "" for the default exchange)."""

    channel: tuple[int, int]
    data: bytes
    exchange: str


def exchange_name(plan: Plan) -> str:
    exchange = plan.destination.exchange
    return str(exchange.name if isinstance(exchange, Exchange) else exchange or "")


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
        self.reset()
        # py-amqp's confirming publish waits for each answer: this channel's publishes do not.
        self.channel.basic_publish = self.channel._basic_publish
        self.channel.events["basic_ack"].add(
            lambda tag, multiple: self._answer(tag, multiple, True)
        )
        self.channel.events["basic_nack"].add(
            lambda tag, multiple: self._answer(tag, multiple, False)
        )

    def reset(self) -> None:
        """Put the channel in confirm mode, numbering from 1: when made, and after the broker
        closed it (py-amqp reopens it under the same number, not in confirm mode)."""
        self.channel.confirm_select()
        self.sent = 0  # messages published on the channel so far
        self._answered_to = 0  # every message up to this one has its answer
        self._answers: dict[int, bool] = {}

    def answered(self, count: int) -> list[Answer]:
        """The answers to the last ``count`` messages so far, after a wait cut short: None
        (taken), a ``MayHaveGone`` (nacked) or False (no answer yet)."""
        first = self.sent - count + 1
        found: list[Answer] = []
        for number in range(first, self.sent + 1):
            taken = self._answers.get(number)
            found.append(False if taken is None else None if taken else _nacked())
        return found

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
        return [None if taken else _nacked() for taken in answers]


def _read_nothing(timeout: float | None = None) -> None:
    """A ``drain_events`` that leaves the broker's answers where they are."""


def _nacked() -> MayHaveGone:
    return MayHaveGone("the broker nacked it")


class AmqpWrites:
    """Messages published through a ``ProducerOutput`` while the socket writes are held back, and
    written together on ``send``; with publisher confirms, on a channel of its own whose
    answers ``answers`` then waits for (``BulkSink``'s output for RabbitMQ)."""

    immediate = False
    answers_later = True  # read by ``land``, while the next chunk is made

    def __init__(self, producer: Any, single: Callable[[Any], ProducerOutput]) -> None:
        self.producer = producer
        self._single = single
        self._messages: list[Frames] = []
        #: The chunk written whose answers are not read yet, and the answers read (or what
        #: broke) until ``answers`` hands them over.
        self._air: list[Frames] = []
        self._landed: list[BaseException | None] | Exception = []
        self.transport: Any = None
        #: Exchanges the broker said it does not have, with when it said so (monotonic s).
        self._missing: dict[str, float] = {}
        #: Exchanges the broker said it has (looked up once per connection).
        self._present: set[str] = {""}
        self._probe: Any = None
        #: The (connection, channel) the chunk's frames are made for (``_fresh``).
        self._on = (0, 0)
        self._fresh()

    def _fresh(self) -> None:
        """Follow the producer's connection: a reconnect brings a new transport (and the
        confirms need a channel on it). A chunk ends on the transport and channel it began on,
        and the next one begins on them while it is in the air: asked once per batch, not per
        message (kombu checks the connection each time)."""
        if self._messages or self._air:
            return
        connection = self.producer.connection
        transport = connection.connection.transport
        if transport is not self.transport:
            self.transport = transport
            self._present = {""}
            self._probe = None
            confirming = connection.connection.confirm_publish
            self._confirms = Confirms(connection) if confirming else None
            publisher = self.producer
            if self._confirms is not None:
                publisher = Producer(self._confirms.channel, auto_declare=False)
            self._output = self._single(publisher)
        channel = self._output.producer.channel
        self._on = (id(channel.connection), channel.channel_id)

    def encode(self, message: Built) -> Frames:
        """Publish the message as usual with the socket writes held back, and return its
        frames (to ``put`` now or later, on the channel they name); keep them as the plan's
        stencil if the plan allows one."""
        self._fresh()
        plan, body, encoded, headers, properties = message
        transport, connection = self.transport, self.producer.connection.connection
        held: list[bytes] = []
        write, drain = transport._write, connection.drain_events
        # py-amqp hands over a view of a buffer it reuses: keep a copy.
        transport._write = lambda data: held.append(bytes(data))
        # Before each publish py-amqp reads whatever the broker sent (looking for a notice that
        # it blocks the connection): that would take the answers of the chunk in the air from
        # ``land``, which reads them (and any such notice) instead.
        connection.drain_events = _read_nothing
        try:
            self._output.publish(message)
        finally:
            transport._write, connection.drain_events = write, drain
        frames = Frames(self._on, b"".join(held), exchange_name(plan))
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
            or stencil.channel != self._on
            or (stencil.signal is None and signals.after_task_publish.receivers)
        ):
            plan.stencil = None  # the next message made in full makes a new one
            return None
        return Frames(stencil.channel, stencil.frames_for(task_id, when), exchange_name(plan))

    def put(self, frames: Frames) -> bool:
        """Buffer a message's frames for the next ``send``; False if they were made for a
        channel this chunk is not on (a reconnect since). Raises ``Undeliverable`` for an
        exchange the broker does not have."""
        self._fresh()
        if frames.channel != self._on:
            return False
        self._check(frames.exchange)
        self._messages.append(frames)
        return True

    def _check(self, exchange: str) -> None:
        """Refuse a message to an exchange the broker lately said it does not have; look an
        exchange up before its first message (a passive declare on a channel of its own, which
        the broker closes if the exchange is missing)."""
        if exchange in self._present:
            return
        learnt = self._missing.get(exchange)
        if learnt is None or time.monotonic() - learnt >= MISSING_RECHECK_S:
            self.land()  # the look-up waits on the connection
            if self._probe is None:
                self._probe = self.producer.connection.connection.channel()
            try:
                self._probe.exchange_declare(exchange, "direct", passive=True)
            except amqp.NotFound as exc:  # py-amqp reopens the probe's channel
                self._missing[exchange] = time.monotonic()
                raise no_such_exchange(exchange, exc) from None
            except amqp.ChannelError:  # refused to say (access): the publish will tell
                pass
            self._present.add(exchange)
            self._missing.pop(exchange, None)
            return
        raise no_such_exchange(exchange, None)

    def send(self) -> None:
        """Write the buffered messages, followed (without confirms) by a no-op whose answer
        says the broker has handled them; ``answers`` reads the broker's answers. Until then
        the next chunk may be made, and ``land`` comes before anything else on the connection."""
        self._air, self._messages = self._messages, []
        try:
            self._write(list(range(len(self._air))))
        except BaseException:
            self._air = []  # the batch settles it as it failed: nothing is left to read
            raise

    def _write(self, todo: list[int]) -> None:
        self.transport.write(b"".join(self._air[index].data for index in todo))
        if self._confirms is None:  # basic.qos that changes nothing, answered in order
            self._output.producer.channel.send_method(spec.Basic.Qos, "lBb", (0, 0, False))

    def land(self) -> None:
        """Read the broker's answers to the chunk in the air, if any, and keep them (or what
        broke) for ``answers``: an answer is seen only by the call that reads it, so this comes
        before any other call that waits on the connection (a declare, a revoke)."""
        if not self._air:
            return
        try:
            self._landed = self._read()
        except Exception as exc:
            self._landed = exc
        finally:
            self._air = []

    def answers(self) -> list[BaseException | None]:
        """Per message of the chunk last sent, None if the broker took it, else why not;
        raises what broke if the round trip failed."""
        self.land()
        landed, self._landed = self._landed, []
        if isinstance(landed, Exception):
            raise landed
        return landed

    def _read(self) -> list[BaseException | None]:
        """The broker's answers to the chunk in the air. If the broker closed the channel over
        one of its messages, that one is refused, the ones after it (which the broker
        discarded) are written again on the reopened channel, and so on."""
        messages = self._air
        verdicts: list[BaseException | None] = [None] * len(messages)
        todo = list(range(len(messages)))
        while todo:
            try:
                answers = self._answers(len(todo))
            except amqp.ChannelError as exc:  # the broker closed the channel
                todo = self._closed(exc, [messages[index] for index in todo], todo, verdicts)
                if todo:
                    self._write(todo)
                continue
            for index, answer in zip(todo, answers, strict=True):
                verdicts[index] = answer
            todo = []
        return verdicts

    def _closed(
        self,
        exc: BaseException,
        messages: list[Frames],
        todo: list[int],
        verdicts: list[BaseException | None],
    ) -> list[int]:
        """Settle the messages of a write whose channel the broker closed (``refusals``);
        those that must be written again."""
        confirms = self._confirms
        answers: list[Answer] = (
            [False] * len(todo) if confirms is None else confirms.answered(len(todo))
        )
        out = sort_out(exc, [message.exchange for message in messages], answers)
        if out.missing is not None:
            self._missing[out.missing] = time.monotonic()
            self._present.discard(out.missing)
        self._reopened()
        for position, verdict in out.verdicts.items():
            verdicts[todo[position]] = verdict
        return [todo[position] for position in out.again]

    def _answers(self, count: int) -> list[BaseException | None]:
        """Wait until the broker has handled the last ``count`` messages written: their
        confirms, or (without confirms) the answer to a no-op sent after them."""
        if self._confirms is not None:
            return self._confirms.wait(self.producer.connection, count)
        self._output.producer.channel.wait(spec.Basic.QosOk)
        return [None] * count

    def _reopened(self) -> None:
        """After the broker closed the channel: py-amqp has opened it again (same number, so the
        frames made for it still fit); a confirming channel is put back in confirm mode."""
        if self._confirms is not None:
            self._confirms.reset()

    def discard(self) -> None:
        self._messages = []
