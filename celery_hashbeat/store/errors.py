"""What a store call can fail with (docs/design.md §5): each store turns its client's errors into
these, worded for whoever reads the log, so the beats retry, step down or stop alike."""

from __future__ import annotations

from celery_hashbeat.errors import HashbeatError


class StoreError(HashbeatError):
    """The store could not answer; nothing was changed that the caller must undo."""


class StoreUnavailable(StoreError):  # noqa: N818 - the protocol's published name
    """The store is unreachable or not answering: retry later (with backoff)."""


class ReplicasBehind(StoreUnavailable):
    """The store made a change but fewer replicas than ``hashbeat_store_min_replicas`` hold it:
    the store answers and the lease holds, but what was changed must not be acted on yet."""


class StoreReadOnly(StoreUnavailable):
    """The store answers but refuses writes: a Redis replica, or a read-only SQLite file."""


class StoreAuthError(StoreError):
    """The store refused the credentials: retrying will not help until the settings change."""


class StoreConfigError(ValueError, HashbeatError):
    """The store URL or options are malformed; the message names the setting and the fix."""
