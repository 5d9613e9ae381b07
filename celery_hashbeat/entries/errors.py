"""What the schedule model raises: an entry that cannot run, a schedule with no slot left or too
slow to say one, a ``workers`` list that cannot be fanned out.

Each keeps ``ValueError`` (or ``ScheduleEnded``) as its base, so code that catches those keeps
working, and is a ``HashbeatError`` beside it, so a caller can catch all of the package's errors
in one clause.
"""

from __future__ import annotations

from celery_hashbeat.errors import HashbeatError


class EntryError(ValueError, HashbeatError):
    """A beat_schedule entry that cannot run; the message names the entry."""


class ScheduleEnded(ValueError, HashbeatError):  # noqa: N818 - reads as what happened
    """A schedule with no slot left (a recurrence with a count or an end)."""


class EntryFinished(ScheduleEnded):
    """The entry reached its ``end`` or its ``max_runs``: done as asked, not a fault."""


class ScheduleTooSlow(ValueError, HashbeatError):  # noqa: N818 - reads as what happened
    """A Celery schedule that cannot say its slots in bounded time."""


class FanOutError(ValueError, HashbeatError):
    """A ``workers`` value that cannot be fanned out; the message names the entry."""
