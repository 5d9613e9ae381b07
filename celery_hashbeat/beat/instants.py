"""When the leader wakes for a slot, and what it gets ready before the slot's instant.

Whatever the leader does between a slot's instant and its publish makes the slot late: the sleep
ending late (the system's wake-up delay), taking the due entries off the queue, the claim, making
the messages and writing them. All of it but the write can be done before the instant without
sending anything early (docs/design.md §15):

- the messages are made about ``WINDOW_MS`` before the slot (``publish/ahead.py``);
- the leader wakes ``LEAD_MS`` before the slot, takes the entries due at it off the queue, claims
  them, and hands the ones it won to the publish, which stages their messages and holds them
  (``Hold``) until the beat's clock reads the instant (asleep, then busy for its last
  ``SPIN_MS``): the write leaves at the instant, not a wake-up delay, a walk of the queue, a
  store round trip and the staging after it.

The hold is bounded: a wall clock that steps back (or stands still) sends nothing; the claims are
given back and the slots left due for a later tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from celery_hashbeat.beat.collector import PASS_ROOM_MS, Freezer
from celery_hashbeat.beat.storecalls import FAILED

if TYPE_CHECKING:
    from celery_hashbeat.beat.slotqueue import SlotQueue
    from celery_hashbeat.beat.storecalls import StoreCalls
    from celery_hashbeat.observe.watch import Watch
    from celery_hashbeat.publish.publisher import Publisher

#: How long before a slot the leader wakes for it (ms): room to take a few hundred due entries
#: off the queue, claim them and stage their messages (~5 ms for 167 slots on a 2-core machine),
#: and to absorb most of a loaded machine's wake-up delay.
LEAD_MS = 8

#: The last part of the wait for an instant spent busy rather than asleep (ms): about what a sleep
#: overshoots on a quiet machine.
SPIN_MS = 0.5

#: How much longer than the lead a publish waits for an instant its clock does not reach
#: (seconds): past it, the clock stepped back or stands still.
WAIT_SLACK_S = 0.01


class Instants:
    """Wakes the leader ahead of each slot, makes its messages, and waits out its instant."""

    def __init__(
        self,
        queue: SlotQueue,
        publisher: Publisher,
        watch: Watch,
        calls: StoreCalls,
        now_ms: Callable[[], int],
        clock_s: Callable[[], float],
    ) -> None:
        self._queue = queue
        self._publisher = publisher
        self._watch = watch
        self._calls = calls
        self._now_ms = now_ms
        #: The beat's clock (epoch seconds), which ``now_ms`` reads in whole milliseconds.
        self._clock_s = clock_s
        #: Keeps the collector's full passes off the plans made as entries are first sent.
        self._freezer = Freezer()

    def wake_at_ms(self, head: int) -> int:
        """When to wake for the slot at ``head`` (epoch ms): ``LEAD_MS`` before it, or earlier
        to make its messages first."""
        publisher = self._publisher
        if publisher.outage.cause is not None:
            return head - LEAD_MS
        return min(publisher.ahead.wake_at(head), head - LEAD_MS)

    def due(self, head: int) -> int | None:
        """The instant to dispatch the slots at ``head`` for, if it is time to get them ready:
        ``head`` itself within ``LEAD_MS`` of it, now once it is past."""
        now = self._now_ms()
        return None if head - now > LEAD_MS else max(head, now)

    def hold(self, instant_ms: int) -> Hold:
        """The wait for ``instant_ms``, for the publish to run before its first message."""
        return Hold(self, instant_ms)

    def reached(self, instant_ms: int) -> bool:
        """Wait until the beat's clock reads ``instant_ms``; False if it does not within the
        lead and a little more (it stepped back or stands still). The wait is measured on the
        clock itself, not in whole milliseconds: those would make it look up to a millisecond
        longer than it is, and the sleep end past the instant."""
        clock_s = self._clock_s
        instant_s = instant_ms / 1000
        left_s = instant_s - clock_s()
        if left_s <= 0:
            return True
        if left_s > LEAD_MS / 1000 + WAIT_SLACK_S:
            return False  # stepped back since the slots were taken: not waited for
        give_up_at = time.monotonic() + left_s + WAIT_SLACK_S
        # Asleep until SPIN_MS before the instant, then busy: a sleep ends late by the system's
        # wake-up delay, and a busy wait for longer costs the beat's other threads (and the
        # broker's process) their share of a loaded machine's processors.
        time.sleep(max(0.0, left_s - SPIN_MS / 1000))
        while clock_s() < instant_s:
            if time.monotonic() > give_up_at:
                return False
        return True

    def make_ahead(self, head: int) -> None:
        """While nothing is due, make the messages of the slots due next (see ``publish.ahead``);
        with time to spare, write the history waiting rather than send it with the next claim."""
        now = self._now_ms()
        publisher = self._publisher
        slots = publisher.take_ahead(self._queue, head, now)
        if slots is None:
            return
        outbox = self._watch.outbox
        if head - now > publisher.ahead.window_ms // 2 and outbox:
            calls = self._calls
            if calls.attempt(calls.store.record, outbox.drain()) is FAILED:
                return
        publisher.make_ahead(slots, head - LEAD_MS, now, self._now_ms)
        if head - self._now_ms() > PASS_ROOM_MS:
            self._freezer.grown(publisher.kept)


class Hold:
    """One publish's wait for its slots' instant (``Instants.reached``), called on the broker's
    thread once the messages are staged; ``missed`` once it returned False."""

    def __init__(self, instants: Instants, instant_ms: int) -> None:
        self._instants = instants
        self._instant_ms = instant_ms
        self.missed = False

    def __call__(self) -> bool:
        self.missed = not self._instants.reached(self._instant_ms)
        return not self.missed
