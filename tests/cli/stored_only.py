"""A Celery app with an empty beat_schedule: every entry it runs is added at run time (the store's)
or Celery's own ``celery.backend_cleanup``. HASHBEAT_TEST_STORE_URL and HASHBEAT_TEST_PREFIX name
the store, as for ``tests.cli.proj``."""

from __future__ import annotations

import os

from celery import Celery

app = Celery("stored_only", broker="memory://", set_as_current=False)
app.conf.update(
    timezone="UTC",
    beat_enable_remote_control=False,
    hashbeat_store_url=os.environ.get("HASHBEAT_TEST_STORE_URL", "sqlite:///:memory:"),
    hashbeat_key_prefix=os.environ.get("HASHBEAT_TEST_PREFIX", "hashbeat"),
    beat_schedule={},
)
