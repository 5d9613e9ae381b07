"""Keeping Python's garbage collector from pausing the beat at a slot.

A beat's long-lived objects (its entries, and each entry's plan and message stencil, made on its
first slot) are never cyclic garbage, but the collector's full passes walk them all: at 10,000
entries a pass took 50-70 ms, and one that fell on a slot made it that late. So they are frozen
(``gc.freeze``: left out of every later pass) once built: the schedule at start-up, and the plans
as they accumulate, from the idle time before a slot. Only what was made since is walked.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: The plans kept grow by this share (and at least ``FREEZE_STEP``) before they are frozen again.
FREEZE_GROWTH = 0.1
FREEZE_STEP = 100


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
    """Freezes the long-lived objects made while running, as their number grows."""

    def __init__(self) -> None:
        self.frozen_at = 0

    def grown(self, kept: int) -> None:
        """``kept`` long-lived things (plans) exist now: freeze them if enough are new. Called
        when there is time: what was not frozen yet is collected first (a pass over only the
        objects made since the last freeze), so that no garbage is frozen with them."""
        if kept - self.frozen_at < max(FREEZE_STEP, int(self.frozen_at * FREEZE_GROWTH)):
            return
        self.frozen_at = kept
        gc.collect()
        gc.freeze()
