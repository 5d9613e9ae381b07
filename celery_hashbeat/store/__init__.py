"""Where the beats meet: the coordination protocol (DESIGN.md §5) and its two stores."""

from __future__ import annotations

from ._util import config_error
from .base import (
    BeatInfo,
    LeaseInfo,
    Store,
    StoreAuthError,
    StoreConfigError,
    StoreError,
    StoreUnavailable,
)
from .redis import RedisStore
from .redis_connect import SCHEMES as REDIS_SCHEMES
from .sqlite import SQLiteStore

__all__ = [
    "BeatInfo",
    "LeaseInfo",
    "RedisStore",
    "SQLiteStore",
    "Store",
    "StoreAuthError",
    "StoreConfigError",
    "StoreError",
    "StoreUnavailable",
    "open_store",
]


def open_store(url: str, prefix: str = "hashbeat", **options: object) -> Store:
    """The store that ``url`` names (the ``hashbeat_store_url`` setting), not yet connected.

    ``options`` go to the store's constructor: see RedisStore and SQLiteStore for their names.
    """
    scheme = url.partition("://")[0].lower()
    if scheme in REDIS_SCHEMES:
        return RedisStore(url, prefix, **options)
    if scheme == "sqlite":
        return SQLiteStore(url, prefix, **options)
    supported = ", ".join([*(f"{name}://" for name in REDIS_SCHEMES), "sqlite:///path"])
    raise config_error(url, "its scheme names no known store", f"use one of {supported}")
