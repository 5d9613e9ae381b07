"""A Celery app whose entries run on workers (docs/design.md §11-12), for the command line tests:
one on every live worker, one on two named workers, and one that must not overlap its runs.

HASHBEAT_TEST_STORE_URL and HASHBEAT_TEST_PREFIX name the store, as for tests.cli.proj.
"""

from __future__ import annotations

import os

from celery import Celery

from celery_hashbeat import hashcron, hashinterval

app = Celery("fanned", broker="memory://", set_as_current=False)
app.conf.update(
    timezone="UTC",
    worker_direct=True,
    hashbeat_store_url=os.environ.get("HASHBEAT_TEST_STORE_URL", "sqlite:///:memory:"),
    hashbeat_key_prefix=os.environ.get("HASHBEAT_TEST_PREFIX", "hashbeat"),
    beat_schedule={
        "refresh": {"task": "fanned.refresh", "schedule": hashcron("H * * * *"), "workers": "*"},
        "rotate-logs": {
            "task": "fanned.rotate",
            "schedule": hashinterval(3600),
            "workers": ["celery@web-1", "celery@web-2"],
        },
        "import-orders": {
            "task": "fanned.import_orders",
            "schedule": hashcron("H/5 * * * *"),
            "overlap": "skip",
        },
    },
)
