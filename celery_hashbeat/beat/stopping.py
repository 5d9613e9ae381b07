"""Stop requests as a flag, so that a stop never lands in the middle of a publish or a claim.

Celery's beat answers SIGTERM and SIGINT by raising SystemExit wherever the main thread is. Cut
between a message reaching the broker and the scheduler noting it, that would give back a claim
whose slot went out, and a standby would send it again. Blocking the signals does not help either:
a signal mask covers one thread, and any other thread (Sentry's, OpenTelemetry's) takes the signal
instead. So the scheduler replaces the handlers with ones that only note the request while a tick
runs; the tick winds down (within a second, whatever the broker or store is doing) and then hands
the request to the handler it replaced. Between ticks the request goes to that handler at once.

A stop is passed on once. From then on, and while the scheduler closes (``shield``), a further
SIGTERM or SIGINT is only noted: Celery's handler would raise SystemExit in the middle of the lease
release the first one started, and the lease would be kept for its whole TTL. Once a stop is under
way and the scheduler has closed, further stop signals are ignored rather than handed back:
Python restores the default action of the signals it handles as the interpreter exits, and a
second SIGTERM landing then would kill a process that had stopped cleanly (exit -15, not 0).
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: How long a stop waits for a call already under way before leaving it behind (seconds).
GRACE = 0.5


class StopRequests:
    """SIGTERM/SIGINT noted while a tick runs, passed on to the replaced handlers afterwards."""

    def __init__(self) -> None:
        self.requested_at: float | None = None
        self._signal: int | None = None
        self._ticking = False
        self._replaced: dict[int, Any] = {}
        #: A stop is under way (passed on, or the scheduler is closing): signals are only noted.
        self._shielded = False

    @property
    def requested(self) -> bool:
        return self.requested_at is not None

    def overdue(self) -> bool:
        """True once a stop has waited GRACE seconds: whatever is still running is left behind."""
        at = self.requested_at
        return at is not None and time.monotonic() - at >= GRACE

    def install(self) -> None:
        """Take over the stop signals' Python handlers (main thread only; elsewhere the process's
        owner handles signals and nothing changes)."""
        if self._replaced or threading.current_thread() is not threading.main_thread():
            return
        for signum in STOP_SIGNALS:
            current = signal.getsignal(signum)
            if callable(current):
                self._replaced[signum] = current
                signal.signal(signum, self._note)

    def shield(self) -> None:
        """From now on a stop signal is only noted, never passed on: what runs next (the lease
        release, on whatever path the process leaves by) is not cut short."""
        self.install()
        self._shielded = True

    def uninstall(self) -> None:
        """Give the stop signals back to the handlers they had; if a stop is under way, ignore
        them instead: the process is leaving, and one more stop has nothing left to do."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, handler in self._replaced.items():
            if signal.getsignal(signum) == self._note:
                signal.signal(signum, signal.SIG_IGN if self.requested else handler)
        self._replaced.clear()

    def ticking(self, on: bool) -> None:
        """Mark the start and end of a tick; at the end, pass on a stop that came during it."""
        self._ticking = on
        if not on and self._signal is not None:
            self._pass_on(self._signal, None)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        if self.requested_at is None:
            self.requested_at = time.monotonic()
        if self._shielded:
            return  # a stop is under way already
        self._signal = signum
        if not self._ticking:
            self._pass_on(signum, frame)

    def _pass_on(self, signum: int, frame: FrameType | None) -> None:
        self._signal = None
        self._shielded = True  # set first: a signal from here on cannot start a second stop
        handler = self._replaced.get(signum)
        if handler is None:
            raise SystemExit(0)
        handler(signum, frame)
