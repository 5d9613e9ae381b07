"""The settings' names as an app spells them (docs/design.md §9): every name the scheduler reads,
the same names under a namespace (Django's ``namespace="CELERY"`` reads
``CELERY_HASHBEAT_LEASE_TTL``), messages that name a setting the way the app writes it, and a
warning, with the likely fix, for each ``hashbeat_*`` key that nothing reads.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from celery_hashbeat._logs import SETTINGS
from celery_hashbeat._outage import Once

logger = SETTINGS

#: Every setting the scheduler reads; any other ``hashbeat_*`` name is a typo worth a warning.
KNOWN_SETTINGS = (
    "hashbeat_store_url",
    "hashbeat_key_prefix",
    "hashbeat_lease_ttl",
    "hashbeat_lease_renew_interval",
    "hashbeat_catch_up",
    "hashbeat_catch_up_window",
    "hashbeat_overlap",
    "hashbeat_running_ttl",
    "hashbeat_workers_refresh",
    "hashbeat_balance",
    "hashbeat_store_options",
    "hashbeat_redis_use_ssl",
    "hashbeat_sentinel_master",
    "hashbeat_http_port",
    "hashbeat_http_host",
    "hashbeat_metrics_entry_labels",
    "hashbeat_store_min_replicas",
    "hashbeat_web_token",
)

#: Unknown settings already warned about: Celery builds the scheduler twice at start.
_warned = Once()

#: The settings a message may name, in the spelling of an app without a namespace.
SETTING_NAME = re.compile(r"\b(?:hashbeat_[a-z_]+|beat_cron_starting_deadline)\b")


def in_app_spelling(conf: Any, text: str) -> str:
    """``text`` with each setting it names spelled as this app's configuration spells it: under
    Django's ``namespace="CELERY"``, ``hashbeat_catch_up`` is ``CELERY_HASHBEAT_CATCH_UP``."""
    try:
        prefix = str(getattr(conf, "prefix", None) or "")
        keys = read_keys(conf)
    except Exception:  # a configuration that cannot even be read: say it as it is
        return text
    if not prefix:
        return text
    spelled = {name: key for key, name in keys.items() if key != name}
    spelled["beat_cron_starting_deadline"] = _prefixed(prefix, "beat_cron_starting_deadline")
    return SETTING_NAME.sub(lambda found: spelled.get(found[0], found[0]), text)


def _prefixed(prefix: str, name: str) -> str:
    spelled = prefix + name
    return spelled.upper() if prefix.isupper() else spelled.lower()


def read_keys(conf: Any) -> dict[str, str]:
    """Every configuration key that ``conf.get()`` answers a known setting from, mapped to the
    setting: the name itself and, in an app configured with a namespace (Django's
    ``namespace="CELERY"``), the prefixed name in the prefix's case (``CELERY_HASHBEAT_LEASE_TTL``).
    """
    conf.get(KNOWN_SETTINGS[0])  # a pending configuration learns its namespace when first read
    prefix = str(getattr(conf, "prefix", None) or "")
    keys = {name: name for name in KNOWN_SETTINGS}
    for name in KNOWN_SETTINGS if prefix else ():
        keys[_prefixed(prefix, name)] = name
    return keys


def unread_setting(key: str, conf: Any) -> str | None:
    """What is wrong with ``key`` and what to write instead, if it looks like a hashbeat setting
    that ``conf`` does not read; None if it is read or is not meant for celery_hashbeat."""
    keys = read_keys(conf)
    if key in keys:
        return None
    prefix = str(getattr(conf, "prefix", None) or "")  # set by read_keys' first read
    lowered = key.lower()
    namespaced = next(
        (p for p in (prefix.lower(), "celery_") if p and lowered.startswith(p + "hashbeat_")), ""
    )
    name = lowered[len(namespaced) :]
    if not name.startswith("hashbeat_"):
        return None

    def spelled(setting: str) -> str:
        """The spelling this app reads, namespaced when the app has a namespace and ``key`` is
        in its style (Django's settings hold upper-case names only)."""
        if prefix and (namespaced or key.isupper()):
            return next(k for k, v in keys.items() if v == setting and k != setting)
        return setting

    if name in KNOWN_SETTINGS:
        if namespaced and not prefix:
            return (
                f"setting {key} is ignored: this app reads {name}; the "
                f"{key[: len(namespaced)]}HASHBEAT_* spelling is read only by an app configured "
                f"with config_from_object(..., namespace='CELERY')"
            )
        return f"setting {key} is ignored: this app reads it as {spelled(name)}"
    # Compared without the "hashbeat_" that every name shares, which would make anything close.
    stem = len("hashbeat_")
    close = difflib.get_close_matches(name[stem:], [known[stem:] for known in KNOWN_SETTINGS], n=1)
    fix = (
        f"did you mean {spelled('hashbeat_' + close[0])}?"
        if close
        else f"the settings are {', '.join(spelled(known) for known in KNOWN_SETTINGS)}"
    )
    return f"setting {key} is not a celery_hashbeat setting and is ignored: {fix}"


def warn_unknown(conf: Any) -> None:
    """Warn once about each ``hashbeat_*`` setting that nothing reads, a typo such as
    ``hashbeat_lease_tll`` or a spelling the app does not read (``CELERY_HASHBEAT_*`` without
    Django's namespace), naming what to write: otherwise the default applies without a word."""
    for key in sorted(map(str, conf)):
        if "hashbeat_" not in key.lower():
            continue
        problem = unread_setting(key, conf)
        if problem is not None and _warned.first(key):
            logger.warning("celery_hashbeat: %s", problem)
