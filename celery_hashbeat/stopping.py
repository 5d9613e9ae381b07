"""Holding stop signals across the steps a stop must not cut in half.

Celery's beat answers SIGTERM and SIGINT by raising SystemExit wherever the main thread is. Cut
between a claim and its answer, or in the middle of a publish, a stop would leave the scheduler
unsure whether a slot went out; held for those bounded steps, it lands between them instead.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """Delay SIGTERM and SIGINT until the block ends (where the platform can)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
