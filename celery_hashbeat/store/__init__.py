"""Where the beats meet: the coordination protocol (docs/design.md §5) and its stores."""

from __future__ import annotations

from celery_hashbeat.store.base import Store
from celery_hashbeat.store.errors import (
    StoreAuthError,
    StoreConfigError,
    StoreError,
    StoreReadOnly,
    StoreUnavailable,
)
from celery_hashbeat.store.options import config_error, mask_url
from celery_hashbeat.store.postgres.connect import DJANGO as DJANGO_SCHEME
from celery_hashbeat.store.postgres.connect import SCHEMES as POSTGRES_SCHEMES
from celery_hashbeat.store.postgres.store import PostgresStore
from celery_hashbeat.store.redis.connect import SCHEMES as REDIS_SCHEMES
from celery_hashbeat.store.redis.store import RedisStore
from celery_hashbeat.store.sqlite.store import SQLiteStore
from celery_hashbeat.store.values import BeatInfo, LeaseInfo

__all__ = [
    "BeatInfo",
    "LeaseInfo",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "Store",
    "StoreAuthError",
    "StoreConfigError",
    "StoreError",
    "StoreReadOnly",
    "StoreUnavailable",
    "mask_url",
    "open_store",
]


def open_store(url: str, prefix: str = "hashbeat", **options: object) -> Store:
    """The store that ``url`` names (the ``hashbeat_store_url`` setting), not yet connected.

    ``options`` go to the store's constructor: see RedisStore, SQLiteStore and PostgresStore for
    their names.
    """
    scheme = url.partition("://")[0].lower()
    if scheme in REDIS_SCHEMES:
        return RedisStore(url, prefix, **options)
    if scheme == "sqlite":
        return SQLiteStore(url, prefix, **options)
    if scheme in (*POSTGRES_SCHEMES, DJANGO_SCHEME):
        return PostgresStore(url, prefix, **options)
    supported = ", ".join(
        [
            *(f"{name}://" for name in REDIS_SCHEMES),
            "sqlite:///path",
            *(f"{name}://" for name in POSTGRES_SCHEMES),
            "django://<DATABASES alias>",
        ]
    )
    raise config_error(url, "its scheme names no known store", f"use one of {supported}")
