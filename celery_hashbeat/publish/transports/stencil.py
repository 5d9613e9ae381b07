"""What both transports' stencils hand ``after_task_publish``: another slot's headers and body.

A stencil is one slot's encoded message, reused for the entry's later slots with their own task
id and slot. While ``after_task_publish`` has receivers, each stencil keeps the headers and body
the signal was sent with for its own slot; this turns them into those of another slot.
"""

from __future__ import annotations

from typing import Any

from celery_hashbeat.publish.message import SLOT_HEADER

#: The headers and the body ``after_task_publish`` receives.
Signal = tuple[dict[str, Any], Any]


def signal_for(signal: Signal | None, was: str, task_id: str, when: str) -> Signal:
    """A stencil's headers and body for ``after_task_publish``, as another slot's message has
    them: its task id where the stencil's was, and its ``hashbeat_slot``."""
    assert signal is not None, "a stencil without them is not used while they are wanted"
    headers, body = signal
    headers = {k: task_id if v == was else v for k, v in headers.items()}
    headers[SLOT_HEADER] = when
    return headers, body
