"""redis-py's errors in the protocol's words (StoreAuthError, StoreUnavailable, StoreError).

The caller decides from the class alone whether to retry, step down or stop, so every failure is
sorted here; the message names the store (password masked) and, for a refused login, the fix.
"""

from __future__ import annotations

import redis
from redis.exceptions import RedisClusterException

from celery_hashbeat.store.errors import StoreAuthError, StoreError, StoreReadOnly, StoreUnavailable

# Server replies that mean "not now" rather than "never": retrying later can succeed.
# MOVED, ASK and CLUSTERDOWN come from a Redis Cluster whose slots are moving (a failover).
TRANSIENT_REPLIES = (
    "BUSY",
    "LOADING",
    "MASTERDOWN",
    "READONLY",
    "OOM",
    "MISCONF",
    "TRYAGAIN",
    "MOVED",
    "ASK",
    "CLUSTERDOWN",
)

#: Replies that say a Redis Cluster's slot map is out of date.
SLOTS_MOVED_REPLIES = ("MOVED", "ASK", "CLUSTERDOWN")

#: How redis-py words a refused login inside a cluster client's "cannot be connected" error.
CLUSTER_AUTH_WORDING = (
    "invalid username-password pair",
    "Authentication required",
    "WRONGPASS",
    "NOAUTH",
    "NOPERM",
)

#: How Redis words a command sent before a login it requires (the URL has no password).
NO_PASSWORD_WORDING = ("NOAUTH", "HELLO must be called", "Authentication required")

AUTH_ERRORS = (
    redis.AuthenticationError,
    redis.AuthenticationWrongNumberOfArgsError,
    redis.exceptions.NoPermissionError,
)

TRANSIENT_ERRORS = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.ClusterError,
    RedisClusterException,
)


def translate(
    exc: redis.RedisError | RedisClusterException, url: str, secret: str | None, cluster: bool
) -> StoreError:
    """The protocol's error for ``exc``, raised by the store at ``url`` (masked); ``secret``, the
    password, is kept out of the message."""
    text = str(exc) or type(exc).__name__
    if secret:
        text = text.replace(secret, "***")
    # redis-py's cluster client reports a refused login as "cannot be connected", in words.
    refused = isinstance(exc, RedisClusterException) and any(
        words in text for words in CLUSTER_AUTH_WORDING
    )
    example = (
        "redis+cluster://user:password@host:port,host:port"
        if cluster
        else "redis://user:password@host:port/db"
    )
    if not secret and any(words in text for words in NO_PASSWORD_WORDING):
        return StoreAuthError(
            f"Redis store {url} asks for a password, and hashbeat_store_url gives none: add "
            f"the user and password to it ({example})"
        )
    if (
        refused
        or isinstance(exc, AUTH_ERRORS)
        or text.startswith(("WRONGPASS", "NOAUTH", "NOPERM"))
    ):
        return StoreAuthError(
            f"Redis store {url} refused the credentials ({text}): set the right user and "
            f"password in hashbeat_store_url ({example})"
        )
    if "DB index is out of range" in text:
        return StoreError(
            f"Redis store {url} has no such database ({text}): give a database number the "
            f"server has in hashbeat_store_url (0-15 unless its `databases` setting says more)"
        )
    if isinstance(exc, redis.exceptions.ReadOnlyError) or text.startswith("READONLY"):
        return StoreReadOnly(
            f"Redis store {url} is read-only: it is a replica ({text}); point "
            f"hashbeat_store_url at the primary; will retry"
        )
    if isinstance(exc, TRANSIENT_ERRORS) or text.startswith(TRANSIENT_REPLIES):
        return StoreUnavailable(f"Redis store {url} is not answering ({text}); will retry")
    return StoreError(f"Redis store {url} failed: {type(exc).__name__}: {text}")
