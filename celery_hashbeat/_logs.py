"""Every logger celery_hashbeat logs under, named once here.

Operators filter and silence these names in their logging configuration, so a name is part of the
interface: it does not follow a module when the module moves. The names are those the package
has always used (``celery_hashbeat.<module>`` of the flat layout before the rooms). A leaf: the
store imports it, so it imports nothing but ``logging`` (no Celery).
"""

from __future__ import annotations

import logging

#: Celery's own beat logger: the "Sending due task" lines, where Celery's scheduler logs them.
BEAT = logging.getLogger("celery.beat")
#: The beat's runtime: ticks, leadership, publishing, triggers, controls, building the schedule.
SCHEDULER = logging.getLogger("celery_hashbeat.scheduler")
#: The lease, as one beat holds, renews and loses it.
LEASE = logging.getLogger("celery_hashbeat.lease")
#: Overlap policies: slots skipped or revoked because a run is still going.
OVERLAP = logging.getLogger("celery_hashbeat.overlap")
#: Where the schedule meets a deliberate difference from Celery's scheduler.
COMPAT = logging.getLogger("celery_hashbeat.compat")
#: Fanned-out entries and the workers they are copied to.
FANOUT = logging.getLogger("celery_hashbeat.fanout")
#: The beat's HTTP server (health, status, metrics).
HTTP = logging.getLogger("celery_hashbeat.http")
#: The worker's side of the run leases.
RUN_LEASES = logging.getLogger("celery_hashbeat.running")
#: The worker's side of the history: started, succeeded, failed.
OUTCOMES = logging.getLogger("celery_hashbeat.outcomes")
#: The stores (Redis, SQLite).
STORE = logging.getLogger("celery_hashbeat.store")
#: The hashbeat_* settings as they are read and checked.
SETTINGS = logging.getLogger("celery_hashbeat.settings")
#: The console (the web page and the Django admin): every operator's action, with who did it.
WEB = logging.getLogger("celery_hashbeat.web")

#: Every logger above: the set a test pins.
ALL = (
    BEAT,
    SCHEDULER,
    LEASE,
    OVERLAP,
    COMPAT,
    FANOUT,
    HTTP,
    RUN_LEASES,
    OUTCOMES,
    STORE,
    SETTINGS,
    WEB,
)
