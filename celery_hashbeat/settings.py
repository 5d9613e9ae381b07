"""The hashbeat_* settings (docs/design.md §6), read with ``app.conf.get()`` and checked before
anything connects, so a bad value stops beat at once with one message that names the setting and
the fix.

``app.conf.get()`` also finds the Django spelling (``CELERY_HASHBEAT_STORE_URL``) when the app was
configured with ``namespace="CELERY"``.
"""

from __future__ import annotations

import enum
import math
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from celery.exceptions import ImproperlyConfigured
from celery.utils.log import LoggingProxy

from celery_hashbeat._logs import SETTINGS
from celery_hashbeat.spellings import in_app_spelling, warn_unknown


class Policy(str, enum.Enum):
    """A policy chosen by name. A member is the text users write (``"latest"``), equal to it
    and printed, stored and sent as it, so settings, entry options, the store and every message
    read as they did when policies were plain strings."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    def __repr__(self) -> str:
        return repr(self.value)


class CatchUp(Policy):
    """Which of an entry's missed slots a leader sends when it finds them (docs/design.md §5)."""

    #: Send the most recent missed slot only.
    LATEST = "latest"
    #: Send every missed slot, oldest first (the latest 100 at most).
    ALL = "all"
    #: Send none: wait for the next slot.
    SKIP = "skip"


class Overlap(Policy):
    """What happens to a slot that falls due while the entry's previous run is queued or running
    (docs/design.md §12)."""

    #: Send it anyway, as Celery's own beat does; no run lease is taken.
    ALLOW = "allow"
    #: Send nothing; the slot is recorded as skipped (history, metrics, one log line).
    SKIP = "skip"
    #: Send the most recent such slot as soon as the run ends; older ones are skipped.
    BUFFER_ONE = "buffer_one"
    #: Revoke the running task and send the slot.
    REPLACE = "replace"


P = TypeVar("P", bound=Policy)


logger = SETTINGS


class ConfigurationExit(SystemExit):
    """Ends ``celery beat`` with one line naming the setting (as the app spells it, given
    ``conf``) and the fix, and no traceback: a mistake in the configuration is the user's to
    correct, not a crash to debug.

    Before Celery sets up logging, the interpreter prints the SystemExit's message once, as one
    write to stderr (an uncaught exception would be written in hundreds of pieces). Once Celery
    has redirected stderr into its log, that write would become a WARNING record, so the line is
    logged as an ERROR instead and the exit carries only its code, 1. A thread swallows a
    SystemExit without a word, so off the main thread (``EmbeddedService(thread=True)``) the line
    is logged as well.
    """

    def __init__(self, problem: Exception, conf: Any = None) -> None:
        text = str(problem) if conf is None else in_app_spelling(conf, str(problem))
        message = f"celery_hashbeat: {text}"
        if threading.current_thread() is not threading.main_thread():
            logger.critical("%s", message)
        elif isinstance(sys.stderr, LoggingProxy):
            logger.error("%s", message)
            super().__init__(1)
            return
        super().__init__(message)


DEFAULT_STORE_URL = "sqlite:///celerybeat-hashbeat.sqlite"
DEFAULT_KEY_PREFIX = "hashbeat"
DEFAULT_LEASE_TTL = 10.0
DEFAULT_RUNNING_TTL = 60.0
DEFAULT_WORKERS_REFRESH = 60.0
DEFAULT_HTTP_HOST = "127.0.0.1"

#: The Redis store's timeouts; the SQLite store has one, ``timeout``.
TIMEOUT_OPTIONS = ("socket_timeout", "socket_connect_timeout")


def setting(conf: Any, name: str, default: Any) -> Any:
    """A setting's value; unset and None both mean the default."""
    value = conf.get(name)
    return default if value is None else value


def seconds(value: object, where: str, example: str) -> float:
    """A positive, finite number of seconds (numeric text too, as environment-driven settings
    often are), or an error naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        number = math.nan
    else:
        try:
            number = float(value)
        except ValueError:
            number = math.nan
    if not (number > 0 and math.isfinite(number)):
        raise ImproperlyConfigured(
            f"{where} must be a positive number of seconds, not {value!r}: set it to e.g. {example}"
        )
    return number


def policy(kind: type[P], value: object, where: str) -> P:
    """The member of ``kind`` named by ``value`` (its text, or the member), or an error naming
    ``where`` and the choices."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(repr(member) for member in kind)
        raise ImproperlyConfigured(f"{where} must be one of {choices}, not {value!r}") from None


def catch_up_mode(value: object, where: str) -> CatchUp:
    """A CatchUp policy, or an error naming ``where``."""
    return policy(CatchUp, value, where)


def overlap_mode(value: object, where: str) -> Overlap:
    """An Overlap policy, or an error naming ``where``."""
    return policy(Overlap, value, where)


#: Text that environment-driven settings use for True and False.
FLAG_WORDS = {"true": True, "1": True, "yes": True, "on": True}
FLAG_WORDS |= {"false": False, "0": False, "no": False, "off": False}


def flag(value: object, where: str, advice: str) -> bool:
    """True or False (or their usual spellings in text), or an error naming ``where``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in FLAG_WORDS:
        return FLAG_WORDS[value.strip().lower()]
    raise ImproperlyConfigured(f"{where} must be True or False, not {value!r}: set it to {advice}")


def catch_up_window(value: object, where: str) -> float | None:
    """A window in seconds, or None for no window."""
    return None if value is None else seconds(value, where, "3600, or None for no limit")


@dataclass(frozen=True)
class Settings:
    """Everything the scheduler reads from the configuration."""

    store_url: str = DEFAULT_STORE_URL
    key_prefix: str = DEFAULT_KEY_PREFIX
    lease_ttl: float = DEFAULT_LEASE_TTL
    renew_interval: float = DEFAULT_LEASE_TTL / 3
    catch_up: CatchUp = CatchUp.LATEST
    catch_up_window: float | None = None
    store_options: Mapping[str, Any] = field(default_factory=dict)
    overlap: Overlap = Overlap.ALLOW
    running_ttl: float = DEFAULT_RUNNING_TTL
    #: How often the leader asks which workers are alive, for entries fanned out to "*".
    workers_refresh: float = DEFAULT_WORKERS_REFRESH
    #: Whether hashcron entries without ``balanced=`` are balanced (docs/design.md §16).
    balance: bool = False
    #: The port of /metrics, /livez, /readyz and /status (docs/design.md §14); None serves nothing,
    #: 0 any free port.
    http_port: int | None = None
    http_host: str = DEFAULT_HTTP_HOST
    #: Whether the per-entry metrics carry an ``entry`` label (one series per entry).
    metrics_entry_labels: bool = False
    #: Celery's ``beat_cron_starting_deadline`` (seconds): the catch-up window of crontab entries.
    cron_deadline: float | None = None
    #: What the console's actions need (docs/design.md §18); None: the console only reads.
    web_token: str | None = None

    @property
    def lease_ttl_ms(self) -> int:
        return math.ceil(self.lease_ttl * 1000)

    @property
    def running_ttl_ms(self) -> int:
        return math.ceil(self.running_ttl * 1000)

    @classmethod
    def from_conf(cls, conf: Any, *, warn: bool = True) -> Settings:
        """Read and check the settings of a Celery configuration; with ``warn``, name any
        ``hashbeat_*`` setting that nothing reads (Celery builds its scheduler twice at start,
        once only for the banner, which passes ``warn=False`` to keep the log to one warning)."""
        if warn:
            warn_unknown(conf)
        try:
            return cls._read(conf)
        except ImproperlyConfigured as exc:
            raise ImproperlyConfigured(in_app_spelling(conf, str(exc))) from None

    @classmethod
    def _read(cls, conf: Any) -> Settings:
        url = setting(conf, "hashbeat_store_url", DEFAULT_STORE_URL)
        if not isinstance(url, str):
            raise ImproperlyConfigured(
                f"hashbeat_store_url must be a URL string such as redis://host:6379/0 or "
                f"{DEFAULT_STORE_URL}, not {url!r}"
            )
        prefix = setting(conf, "hashbeat_key_prefix", DEFAULT_KEY_PREFIX)
        if not isinstance(prefix, str) or not prefix or "{" in prefix or "}" in prefix:
            raise ImproperlyConfigured(
                f"hashbeat_key_prefix must be a non-empty string without braces (the store "
                f"adds its own hash tag), not {prefix!r}"
            )
        ttl = seconds(
            setting(conf, "hashbeat_lease_ttl", DEFAULT_LEASE_TTL), "hashbeat_lease_ttl", "10"
        )
        renew = seconds(
            setting(conf, "hashbeat_lease_renew_interval", ttl / 3),
            "hashbeat_lease_renew_interval",
            f"{ttl / 3:g}",
        )
        if ttl < 3 * renew:
            raise ImproperlyConfigured(
                f"hashbeat_lease_ttl ({ttl:g}s) must be at least 3x the lease renewal period "
                f"(hashbeat_lease_renew_interval, {renew:g}s), so a leader renews twice before "
                f"its lease can lapse: raise hashbeat_lease_ttl to {3 * renew:g} or more, or "
                f"lower hashbeat_lease_renew_interval to {ttl / 3:g} or less"
            )
        mode = catch_up_mode(setting(conf, "hashbeat_catch_up", "latest"), "hashbeat_catch_up")
        window = catch_up_window(conf.get("hashbeat_catch_up_window"), "hashbeat_catch_up_window")
        overlap = overlap_mode(setting(conf, "hashbeat_overlap", "allow"), "hashbeat_overlap")
        running_ttl = seconds(
            setting(conf, "hashbeat_running_ttl", DEFAULT_RUNNING_TTL), "hashbeat_running_ttl", "60"
        )
        refresh = seconds(
            setting(conf, "hashbeat_workers_refresh", DEFAULT_WORKERS_REFRESH),
            "hashbeat_workers_refresh",
            "60",
        )
        balance = flag(
            setting(conf, "hashbeat_balance", False),
            "hashbeat_balance",
            "True to balance every hashcron entry, or pass balanced=True to the ones you choose",
        )
        options = store_options(conf, url, renew)
        deadline = catch_up_window(
            conf.get("beat_cron_starting_deadline"), "beat_cron_starting_deadline"
        )
        port = http_port(conf.get("hashbeat_http_port"))
        host = setting(conf, "hashbeat_http_host", DEFAULT_HTTP_HOST)
        if not isinstance(host, str) or not host:
            raise ImproperlyConfigured(
                f"hashbeat_http_host must be an address to listen on, such as 127.0.0.1 or "
                f"0.0.0.0 (every interface, as a Kubernetes probe needs), not {host!r}"
            )
        labels = flag(
            setting(conf, "hashbeat_metrics_entry_labels", False),
            "hashbeat_metrics_entry_labels",
            "True for one series per entry, or leave it unset",
        )
        token = setting(conf, "hashbeat_web_token", None)
        if token is not None and (not isinstance(token, str) or not token.strip()):
            raise ImproperlyConfigured(
                f"hashbeat_web_token must be a non-empty string (a secret the console's login "
                f"asks for), or left unset for a console that only reads, not {token!r}"
            )
        return cls(
            url,
            prefix,
            ttl,
            renew,
            mode,
            window,
            options,
            overlap,
            running_ttl,
            refresh,
            balance,
            http_port=port,
            http_host=host,
            metrics_entry_labels=labels,
            cron_deadline=deadline,
            web_token=token,
        )


def http_port(value: object) -> int | None:
    """A TCP port (numeric text too, as environment-driven settings often are), 0 for any free
    one, or None to serve no HTTP."""
    if value is None:
        return None
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str) and value.strip().isdigit():
        number = int(value)
    if number is None or not 0 <= number <= 65535:
        raise ImproperlyConfigured(
            f"hashbeat_http_port must be a TCP port number (0-65535, 0 for any free port), not "
            f"{value!r}: set it to e.g. 9808, or leave it unset to serve no HTTP"
        )
    return number


def store_options(conf: Any, url: str, renew: float) -> dict[str, Any]:
    """The keywords for ``open_store``: ``hashbeat_store_options`` (the store's own option names),
    plus ``hashbeat_sentinel_master`` and ``hashbeat_redis_use_ssl`` in Celery's spelling.

    Unless a timeout is configured, a store call may take at most one renewal period, so a hung
    store cannot keep a leader enqueueing past its lease.
    """
    given = setting(conf, "hashbeat_store_options", {})
    tls = setting(conf, "hashbeat_redis_use_ssl", {})
    for name, value in (("hashbeat_store_options", given), ("hashbeat_redis_use_ssl", tls)):
        if not isinstance(value, Mapping):
            raise ImproperlyConfigured(f"{name} must be a dict, not {type(value).__name__}")
    options = {**tls, **given}
    master = conf.get("hashbeat_sentinel_master")
    if master is not None:
        options.setdefault("master_name", master)
    replicas = min_replicas(conf.get("hashbeat_store_min_replicas"), url)
    if replicas:
        options.setdefault("min_replicas", replicas)
    transport = options.get("transport_options")
    configured = {*options, *(transport if isinstance(transport, Mapping) else ())}
    timeouts = ("timeout",) if url.startswith("sqlite") else TIMEOUT_OPTIONS
    if not any(name in configured or f"{name}=" in url for name in timeouts):
        options.update(dict.fromkeys(timeouts, renew))
    return options


def min_replicas(value: object, url: str) -> int:
    """``hashbeat_store_min_replicas``: how many replicas must hold each claim (Redis WAIT)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImproperlyConfigured(
            f"hashbeat_store_min_replicas must be a whole number of replicas, 0 or more, not "
            f"{value!r}: write for example hashbeat_store_min_replicas = 1"
        )
    if value and url.partition("://")[0].lower() in ("postgresql", "postgres", "django"):
        raise ImproperlyConfigured(
            f"hashbeat_store_min_replicas = {value} is not supported by the PostgreSQL store: "
            "synchronous replication is the server's business (synchronous_commit/"
            "synchronous_standby_names); leave hashbeat_store_min_replicas unset"
        )
    if value and not url.startswith("redis"):
        raise ImproperlyConfigured(
            f"hashbeat_store_min_replicas = {value} needs a Redis store with replicas, and the "
            f"store is {url.partition('://')[0]}://: use a redis:// (Sentinel, Cluster) "
            "hashbeat_store_url, or leave hashbeat_store_min_replicas unset"
        )
    return value
