"""The one place a beat calls its store: every call bounded, every failure told to the lease.

A store whose replies stop coming must not hold the beat's thread (a stop request would wait
with it), so each call runs on the store's helper thread (``_background``) and is given up on
when the beat stops waiting; a call given up on fails as ``StoreUnavailable``, like any other
store outage. Most calls then follow one rule (docs/design.md §10): a failed call makes the beat
a standby until the store answers again, since a leader that cannot reach the store cannot know
that it still holds the lease. ``attempt`` applies that rule; ``call`` leaves the failure to the
caller (the lease itself, and the claim, which has more to do on failure).

Calls are written ``calls.call(calls.store.claim, token, ...)``: the method and its arguments are
checked against ``Store`` by mypy, and nothing reaches the store around the bound.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Final, Literal, ParamSpec, TypeVar

from celery_hashbeat._background import Abandoned, Runner
from celery_hashbeat.store.errors import StoreUnavailable

if TYPE_CHECKING:
    from celery_hashbeat.store.base import Store

P = ParamSpec("P")
T = TypeVar("T")


class Failure(enum.Enum):
    """What ``attempt`` returns for a call that failed (and was told to the lease)."""

    FAILED = "failed"


FAILED: Final = Failure.FAILED


class StoreCalls:
    """Owns the beat's store connection and the thread its calls run on."""

    def __init__(
        self,
        give_up: Callable[[], bool],
        failed: Callable[[BaseException, float], None],
    ) -> None:
        #: Whether a call under way may be left behind (a stop or a close waited long enough).
        self._give_up = give_up
        #: Told of each failed ``attempt``, with the monotonic time: the lease's ``failed``.
        self._failed = failed
        self._runner = Runner("hashbeat-store")
        self._store: Store | None = None

    @property
    def opened(self) -> bool:
        return self._store is not None

    @property
    def store(self) -> Store:
        """The store, whose bound methods are handed to ``call`` and ``attempt``."""
        if self._store is None:
            raise StoreUnavailable("the store is not open yet")
        return self._store

    def open(self, store: Store) -> None:
        self._store = store

    def call(self, method: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``method(*args, **kwargs)`` on the store's thread; ``StoreUnavailable`` if the beat
        stops waiting for it (its outcome is then unknown)."""
        try:
            return self._runner.call(partial(method, *args, **kwargs), give_up=self._give_up)
        except Abandoned as exc:
            name = getattr(method, "__name__", "a store call")
            raise StoreUnavailable(f"{name}: {exc}") from None

    def attempt(
        self, method: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> T | Literal[Failure.FAILED]:
        """``call``, with a failure told to the lease and returned as ``FAILED``."""
        try:
            return self.call(method, *args, **kwargs)
        except Exception as exc:
            self._failed(exc, time.monotonic())
            return FAILED

    def close(self) -> None:
        """Let the store's thread end once its call (if any) returns."""
        self._runner.close()
