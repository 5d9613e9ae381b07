"""The gate a batch waits at while its slots' claim is in flight.

At a slot the leader claims the due slots and publishes those it won. The claim is a round trip
to the store; the publish could not start before it answered, so everything the publish does per
slot came on top of that round trip. With a gate, the publish starts with the claim: the broker's
thread stages the messages of every slot the claim asks for (buffered, not written), and waits
here. Once the claim answered, the leader opens the gate with the slots it may send; the batch
drops the others' messages, unsent, and sends the rest (docs/design.md §15). A slot is still sent
only once it is claimed, and the slots claimed and not sent are given back as before.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


class Gate:
    """Which of a batch's slots (by their place in it) may go: told once, by the leader."""

    def __init__(self) -> None:
        self._opened = threading.Event()
        self._allowed: frozenset[int] = frozenset()

    def open(self, allowed: Iterable[int]) -> None:
        """Let the batch send the slots at these places, and no other. Only the first call
        counts: a gate closed with nothing (a claim that failed) stays so."""
        if not self._opened.is_set():
            self._allowed = frozenset(allowed)
            self._opened.set()

    def close(self) -> None:
        """Let nothing through (if the gate was not opened yet): the claim failed, or the
        leader did not get as far as publishing."""
        self.open(())

    def wait(self) -> frozenset[int]:
        """The places allowed, once the leader said (the batch's thread waits here)."""
        self._opened.wait()
        return self._allowed
