"""Keeping Python's garbage collector from pausing the beat at a slot.

A beat's long-lived objects (its entries, and each entry's plan and message stencil, made on its
first slot) are never cyclic garbage, but the collector's full passes walk them all: at 10,000
entries a pass took 50-70 ms, and one that fell on a slot made it that late. So they are frozen
(``gc.freeze``: left out of every later pass) once built: the schedule at start-up, and the plans
made for the slots due next, in the idle time before them. A pass then walks only what was made
since the last freeze.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: A pass over what was made since the last freeze takes a few milliseconds: it is made only with
#: this much time left before the next slot (ms).
PASS_ROOM_MS = 20


@contextmanager
def building() -> Iterator[None]:
    """Build what lives as long as the process with the collector off, then freeze it.

    Building a million entries makes only objects that live as long as the process: the
    collector's passes over them would find nothing to free. Frozen once built (before the
    collector runs again, or its first pass would walk them all), they stay out of its full
    passes too."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if collecting:
            gc.enable()


class Freezer:
    """Freezes the long-lived objects made while running, as they are made."""

    def __init__(self) -> None:
        self.frozen_at = 0

    def grown(self, kept: int) -> None:
        """``kept`` long-lived things (plans) exist now: freeze them if any are new. Called when
        there is time: what was not frozen yet is collected first (a pass over only the objects
        made since the last freeze), so that no garbage is frozen with them."""
        if kept <= self.frozen_at:
            return
        self.frozen_at = kept
        gc.collect()
        gc.freeze()
