"""``django://<alias>``: the PostgreSQL store on a ``DATABASES`` alias of the Django project the
app runs in, so that a Django user configures no second connection (docs/settings.md).

Each case runs in a subprocess with a settings module of its own, as a beat of that project would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.processes import ROOT

pytest.importorskip("django", reason="Django is not installed: pip install django")

OPEN = (
    "import sys\n"
    "from celery_hashbeat.store import open_store, StoreConfigError\n"
    "try:\n"
    "    store = open_store(sys.argv[1], 'p')\n"
    "    store.acquire('a', 60_000)\n"
    "    print('leader', store.leader().token, type(store).__name__)\n"
    "except StoreConfigError as exc:\n"
    "    print('error', exc)\n"
)


def run_in_project(tmp_path: Path, databases: str, url: str) -> str:
    (tmp_path / "project_settings.py").write_text(f"SECRET_KEY = 'x'\nDATABASES = {databases}\n")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project_settings"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", OPEN, url], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def test_a_django_alias_opens_the_postgresql_store_on_its_database(
    tmp_path: Path, postgres_url: str
) -> None:
    parts = urlsplit(postgres_url)
    databases = repr(
        {
            "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "unused"},
            "beats": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": parts.path.lstrip("/"),
                "USER": parts.username,
                "PASSWORD": parts.password,
                "HOST": parts.hostname,
                "PORT": str(parts.port),
            },
        }
    )
    assert run_in_project(tmp_path, databases, "django://beats") == "leader a PostgresStore"


def test_a_django_alias_that_is_not_postgresql_or_missing_is_named(tmp_path: Path) -> None:
    databases = repr({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db"}})
    out = run_in_project(tmp_path, databases, "django://default")
    assert "DATABASES['default'] uses django.db.backends.sqlite3, not PostgreSQL" in out
    out = run_in_project(tmp_path, databases, "django://replica")
    assert "DATABASES has no alias 'replica'; use one of: default" in out
