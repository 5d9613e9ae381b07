"""The config app of ``config_app`` (a configuration from ``$HASHBEAT_CONFIG``), whose owner
silences the send lines the usual way when ``$HASHBEAT_QUIET_BEAT`` is set: the ``celery.beat``
logger set to WARNING once Celery has set logging up."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery.signals import after_setup_logger

from tests.beat.config_app import app

__all__ = ["app"]


@after_setup_logger.connect
def quiet_beat(**_: Any) -> None:
    if os.environ.get("HASHBEAT_QUIET_BEAT"):
        logging.getLogger("celery.beat").setLevel(logging.WARNING)
