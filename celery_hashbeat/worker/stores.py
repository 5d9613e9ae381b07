"""The store a worker process talks to, for each app's settings, opened in that process."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from celery_hashbeat.settings import Settings
from celery_hashbeat.store import open_store
from celery_hashbeat.worker._thread import PerProcess

if TYPE_CHECKING:
    from celery import Celery

    from celery_hashbeat.store.base import Store


class Stores:
    """This process's stores, one per (store URL, key prefix), shared by the run leases and the
    history of slot tasks; opened after any fork, since a connection never crosses one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._opened: PerProcess[dict[tuple[str, str], Store]] = PerProcess(dict)

    def of(self, app: Celery) -> Store:
        """The store ``app``'s settings name; raises what reading them or opening it raises."""
        with self._lock:
            opened = self._opened.get()
            settings = Settings.from_conf(app.conf, warn=False)
            key = (settings.store_url, settings.key_prefix)
            store = opened.get(key)
            if store is None:
                store = opened[key] = open_store(
                    settings.store_url, prefix=settings.key_prefix, **settings.store_options
                )
            return store
