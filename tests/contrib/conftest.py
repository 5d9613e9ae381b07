"""A Django project for the admin's tests, configured once per process (as Django allows): an
SQLite file for Django's own users and permissions, the admin, and our app. The Celery app is
the test's own (``HASHBEAT_CELERY_APP``), on the real Redis."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from celery_hashbeat.contrib.django import console as django_console
from celery_hashbeat.control.admin import ScheduleAdmin
from tests.web.conftest import admin, shop

__all__ = ["admin", "shop"]

django = pytest.importorskip("django", reason="Django is not installed: pip install -e '.[test]'")

DATABASE = Path(tempfile.mkdtemp(prefix="hashbeat-django-")) / "django.sqlite"


def configure() -> None:
    from django.conf import settings  # noqa: PLC0415 - Django is imported once configured

    if settings.configured:
        return
    settings.configure(
        DEBUG=False,
        SECRET_KEY="hashbeat-tests-only",
        ALLOWED_HOSTS=["127.0.0.1", "localhost", "testserver"],
        ROOT_URLCONF="tests.contrib.urls",
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(DATABASE)}},
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "django.contrib.staticfiles",
            "celery_hashbeat.contrib.django",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        STATIC_URL="/static/",
        USE_TZ=True,
    )
    django.setup()
    from django.core.management import call_command  # noqa: PLC0415 - needs the settings

    call_command("migrate", run_syncdb=True, verbosity=0)


@pytest.fixture
def hashbeat_app(shop: Celery, admin: ScheduleAdmin) -> Iterator[Celery]:
    """Django's admin pointed at the test's Celery app (its entries: see tests/web/conftest)."""
    configure()
    from django.conf import settings  # noqa: PLC0415 - configured just above

    settings.HASHBEAT_CELERY_APP = shop
    yield shop
    for made in django_console._admins.values():
        made.close()
    django_console._admins.clear()
    del settings.HASHBEAT_CELERY_APP


def make_user(name: str, *perms: str, superuser: bool = False) -> Any:
    """A staff user with the named permissions of our app (``change_entry``...)."""
    from django.contrib.auth.models import Permission, User  # noqa: PLC0415 - needs the settings

    User.objects.filter(username=name).delete()
    user = User.objects.create_user(
        name, password="pw-" + name, is_staff=True, is_superuser=superuser
    )
    for codename in perms:
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="hashbeat", codename=codename)
        )
    return user
