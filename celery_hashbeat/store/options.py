"""What both stores share: URL masking, option checking and the wording of configuration errors."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from urllib.parse import parse_qsl

from celery_hashbeat.store.errors import StoreConfigError
from celery_hashbeat.store.values import RunGuard

SETTING = "hashbeat_store_url"

# Long enough for a loaded server or a contended file, short enough that a hung one is noticed
# well within a lease TTL.
DEFAULT_TIMEOUT_S = 3.0


def mask_url(url: str) -> str:
    """The URL with its password hidden, so that it can go into logs and error messages."""
    scheme, sep, rest = url.partition("://")
    netloc_end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    userinfo, at, hosts = rest[:netloc_end].rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if not (sep and at and colon):
        return url
    return f"{scheme}://{user}:***@{hosts}{rest[netloc_end:]}"


def config_error(url: str, problem: str, fix: str) -> StoreConfigError:
    """An error that names the setting, the (masked) URL, what is wrong and what to do."""
    return StoreConfigError(f"{SETTING}={mask_url(url)!r}: {problem}; {fix}")


def check_prefix(prefix: str) -> str:
    """A key prefix fit to sit inside a Redis hash tag, which both stores accept alike."""
    if not prefix or "{" in prefix or "}" in prefix:
        raise StoreConfigError(
            f"hashbeat_key_prefix={prefix!r} is not usable: give a non-empty prefix without braces"
        )
    return prefix


def check_ttl(ttl_ms: int) -> int:
    """A TTL of zero or less would free the lease or a heartbeat at once: a caller's bug."""
    if ttl_ms <= 0:
        raise ValueError(f"a TTL must be a positive number of milliseconds, not {ttl_ms!r}")
    return ttl_ms


def check_token(token: str) -> str:
    """A beat token fit to be written into a fence: "" marks an anchor and "-" an unknown
    claimer, and a "|" would split the stored value wrongly. Any of them is a caller's bug."""
    if token in ("", "-") or "|" in token:
        raise ValueError(f"a beat token must be non-empty, not '-' and without '|', not {token!r}")
    return token


def check_digest(digest: str) -> str:
    """A schedule digest fit for a heartbeat value, whose fields are separated by "|"."""
    if "|" in digest:
        raise ValueError(f"a schedule digest must not contain '|', not {digest!r}")
    return digest


#: The run-lease modes a guarded claim knows ("allow" takes no run lease, so it has no guard).
GUARD_MODES = ("skip", "buffer_one", "replace")


def check_guard(guard: RunGuard) -> RunGuard:
    """A RunGuard the stores can act on; anything else is a caller's bug."""
    check_ttl(guard.ttl_ms)
    if guard.mode not in GUARD_MODES or not guard.task_id or "|" in guard.task_id:
        raise ValueError(
            f"a run guard needs a mode in {GUARD_MODES} and a task id without '|', not {guard!r}"
        )
    return guard


class Options:
    """A store's options: the URL's query overridden by the caller's keywords, all checked."""

    def __init__(
        self, url: str, query: str, given: Mapping[str, object], known: Collection[str]
    ) -> None:
        self.url = url
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
        except ValueError:
            raise config_error(
                url, f"the query {query!r} is malformed", "write ?name=value&..."
            ) from None
        self._values: dict[str, object] = {**dict(pairs), **given}
        unknown = sorted(set(self._values) - set(known))
        if unknown:
            raise config_error(
                url, f"unknown option(s) {', '.join(unknown)}", f"use {', '.join(sorted(known))}"
            )

    def error(self, name: str, expected: str) -> StoreConfigError:
        return config_error(self.url, f"option {name} must be {expected}", f"fix {name}")

    def seconds(self, name: str, default: float) -> float:
        value = self._values.get(name, default)
        try:
            seconds = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            seconds = -1.0
        if not seconds > 0:
            raise self.error(name, f"a positive number of seconds, not {value!r}")
        return seconds

    def flag(self, name: str, default: bool) -> bool:
        value = self._values.get(name, default)
        if isinstance(value, bool):
            return value
        words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
        if isinstance(value, str) and value.lower() in words:
            return words[value.lower()]
        raise self.error(name, f"true or false, not {value!r}")

    def raw(self, name: str) -> object:
        return self._values.get(name)

    def text(self, name: str) -> str | None:
        value = self._values.get(name)
        if value is None or (isinstance(value, str) and value):
            return value
        raise self.error(name, "a non-empty string")

    def mapping(self, name: str) -> dict[str, object]:
        value = self._values.get(name, {})
        if isinstance(value, Mapping):
            return {str(key): item for key, item in value.items()}
        raise self.error(name, "a dict")  # never echo it: it may hold a password

    def given(self, name: str) -> bool:
        return name in self._values
