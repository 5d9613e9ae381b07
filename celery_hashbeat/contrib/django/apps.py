"""The Django app's configuration."""

from __future__ import annotations

from django.apps import AppConfig


class HashbeatConfig(AppConfig):  # type: ignore[misc]  # Django has no stubs here
    name = "celery_hashbeat.contrib.django"
    label = "hashbeat"
    verbose_name = "Hashbeat"
    default_auto_field = "django.db.models.AutoField"
