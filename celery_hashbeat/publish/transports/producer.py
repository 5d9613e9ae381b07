"""The plainest output: each message published through the producer as it is made."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from celery_hashbeat.publish.plans import Built


class ProducerOutput:
    """Each message published at once through the producer: AMQP writes it without waiting for
    the broker (unless publisher confirms are on); a Redis channel without batching (kombu
    before 5.7, or redis-py retries configured) pushes it in its own round trip."""

    immediate = True
    answers_later = False

    def __init__(self, producer: Any) -> None:
        self.producer = producer

    def publish(self, message: Built) -> None:
        plan, body, encoded, headers, properties = message
        to = plan.destination
        self.producer.publish(
            body if encoded is None else encoded[2],
            exchange=to.exchange,
            routing_key=to.routing_key,
            serializer=plan.serializer,
            content_type=None if encoded is None else encoded[0],
            content_encoding=None if encoded is None else encoded[1],
            compression=plan.compression,
            retry=False,
            delivery_mode=to.delivery_mode,
            headers=headers,
            timeout=plan.timeout,
            confirm_timeout=plan.confirm_timeout,
            **properties,
        )

    def send(self) -> None:
        pass  # each message went as it was made

    def land(self) -> None:
        pass

    def answers(self) -> list[BaseException | None]:
        return []

    def discard(self) -> None:
        pass
