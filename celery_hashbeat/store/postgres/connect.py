"""From ``hashbeat_store_url`` to PostgreSQL connection parameters, checked up front.

``postgresql://`` and ``postgres://`` URLs go to libpq as they are (its query parameters too:
``sslmode``, ``sslrootcert``, ...); ``django://<alias>`` takes the connection of a ``DATABASES``
alias of the Django project the app runs in. The driver is psycopg 3, from the extra
``celery-hashbeat[postgres]``. Every check is made when the store is built, so a wrong setting
names what to fix; the connection itself is made on first use (connection.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from celery_hashbeat.store.options import DEFAULT_TIMEOUT_S, Options, config_error, mask_url

SCHEMES = ("postgresql", "postgres")
DJANGO = "django"
#: Our own options (keywords or ``hashbeat_store_options``); libpq's go in the URL's query.
OPTIONS = ("timeout", "socket_timeout", "socket_connect_timeout", "transport_options")
MIN_REPLICAS = (
    "min_replicas is not supported by the PostgreSQL store: synchronous replication is the "
    "server's business (synchronous_commit/synchronous_standby_names)"
)


def psycopg() -> ModuleType:
    """The psycopg 3 module, or a one-line error naming the extra that installs it."""
    try:
        return importlib.import_module("psycopg")
    except ImportError:
        raise config_error(
            "postgresql://...",
            "the PostgreSQL store needs psycopg 3, which is not installed",
            "pip install 'celery-hashbeat[postgres]'",
        ) from None


@dataclass(frozen=True)
class Target:
    """Where to connect: libpq's parameters, the masked URL for messages, the password to keep
    out of them, and how long a connection attempt and a statement may take."""

    params: dict[str, Any]
    url: str
    secret: str | None
    connect_timeout_s: float
    timeout_s: float


def target(url: str, given: Mapping[str, object]) -> Target:
    """Check ``url`` and the options; raise StoreConfigError naming what to fix."""
    if given.get("min_replicas"):
        raise config_error(url, MIN_REPLICAS, "leave hashbeat_store_min_replicas unset")
    options = {name: value for name, value in given.items() if name != "min_replicas"}
    opts = Options(url, "", options, OPTIONS)
    timeout_s = opts.seconds("timeout", opts.seconds("socket_timeout", DEFAULT_TIMEOUT_S))
    connect_s = opts.seconds("socket_connect_timeout", timeout_s)
    scheme = url.partition("://")[0].lower()
    params = _django(url) if scheme == DJANGO else _libpq(url)
    secret = params.get("password") or None
    return Target(params, mask_url(url), secret, connect_s, timeout_s)


def _libpq(url: str) -> dict[str, Any]:
    module = psycopg()
    try:
        params: dict[str, Any] = module.conninfo.conninfo_to_dict(url)
    except module.Error as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        password = _password(url)
        if password:
            text = text.replace(password, "***")
        fix = "write postgresql://user:password@host:5432/database?sslmode=..."
        raise config_error(url, f"libpq cannot read it ({text})", fix) from None
    return params


def _password(url: str) -> str:
    netloc = url.partition("://")[2].split("/", 1)[0]
    userinfo = netloc.rpartition("@")[0]
    return userinfo.partition(":")[2]


def _django(url: str) -> dict[str, Any]:
    """The connection of the ``DATABASES`` alias that ``django://<alias>`` names. Django is
    imported here, when such a URL is opened, never at module level: the store must not need
    Django (nor import it in apps that do not use it)."""
    alias = url.partition("://")[2].strip("/") or "default"
    fix = "run the beat with DJANGO_SETTINGS_MODULE set, or give a postgresql:// URL"
    try:
        settings = importlib.import_module("django.conf").settings
        databases = settings.DATABASES
    except ImportError:
        raise config_error(url, "Django is not installed", fix) from None
    except Exception as exc:  # ImproperlyConfigured: no settings module
        raise config_error(url, f"Django's settings cannot be read ({exc})", fix) from None
    database = databases.get(alias) if isinstance(databases, Mapping) else None
    if not isinstance(database, Mapping):
        known = ", ".join(sorted(databases)) if isinstance(databases, Mapping) else "none"
        raise config_error(url, f"DATABASES has no alias {alias!r}", f"use one of: {known}")
    engine = str(database.get("ENGINE", ""))
    if "postgresql" not in engine and "postgis" not in engine:
        raise config_error(
            url,
            f"DATABASES[{alias!r}] uses {engine or 'no ENGINE'}, not PostgreSQL",
            "name a PostgreSQL alias",
        )
    psycopg()
    extra = database.get("OPTIONS") or {}
    params: dict[str, Any] = {
        "dbname": database.get("NAME") or None,
        "user": database.get("USER") or None,
        "password": database.get("PASSWORD") or None,
        "host": database.get("HOST") or None,
        "port": str(database.get("PORT")) if database.get("PORT") else None,
    }
    if isinstance(extra, Mapping):
        # libpq's own (sslmode, ...); Django's pool and isolation options are not libpq's.
        skip = {"pool", "isolation_level", "server_side_binding", "assume_role", "cursor_factory"}
        params.update({str(k): v for k, v in extra.items() if k not in skip})
    return {name: value for name, value in params.items() if value is not None}
