"""From ``hashbeat_store_url`` and its options to a redis-py client: plain, TLS, Sentinel, Cluster.

Every check of the URL and the options is made here, up front, so that a wrong setting fails when
the store is built and names what to fix; the connection itself is made on first use. RedisStore
(store/redis.py) takes what ``_connect`` returns and speaks the protocol over it.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry
from redis.sentinel import Sentinel

from celery_hashbeat.store.options import DEFAULT_TIMEOUT_S, Options, config_error

SCHEMES = {
    "redis": 6379,
    "rediss": 6379,
    "redis+sentinel": 26379,
    "rediss+sentinel": 26379,
    "redis+cluster": 6379,
    "rediss+cluster": 6379,
}
TLS_OPTIONS = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")
OPTIONS = (
    "socket_timeout",
    "socket_connect_timeout",
    "master_name",
    "sentinel_kwargs",
    "min_replicas",
    "min_replicas_timeout",
    *TLS_OPTIONS,
)
#: How long a claim waits for its replicas unless ``min_replicas_timeout`` says otherwise.
DEFAULT_REPLICAS_TIMEOUT_S = 1.0
CERT_REQS = {
    "required": ssl.CERT_REQUIRED,
    "optional": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
    "cert_required": ssl.CERT_REQUIRED,
    "cert_optional": ssl.CERT_OPTIONAL,
    "cert_none": ssl.CERT_NONE,
}


class Replication:
    """What ``min_replicas`` asks of each claim: that ``replicas`` replicas hold it within
    ``timeout_ms`` (Redis ``WAIT``); zero replicas asks nothing."""

    def __init__(self, replicas: int, timeout_ms: int) -> None:
        self.replicas = replicas
        self.timeout_ms = timeout_ms


class Connected:
    """What ``_connect`` made: a client, or for a cluster how to make one on first use (redis-py's
    cluster client connects as it is built); the Sentinel if any; the password, to keep out of
    messages; and the replication each claim needs."""

    def __init__(
        self,
        client: redis.Redis[str] | Callable[[], RedisCluster[str]],
        sentinel: Sentinel | None,
        secret: str | None,
        replication: Replication,
    ) -> None:
        self.client = client
        self.sentinel = sentinel
        self.secret = secret
        self.replication = replication


def _connect(url: str, given: Mapping[str, object]) -> Connected:
    """Check everything about the URL and options up front; connect lazily, on first use."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise config_error(url, f"it is not a URL ({exc})", "write redis://host:port/db") from None
    if parts.scheme not in SCHEMES:
        raise config_error(url, "the scheme is not a Redis one", f"use one of {', '.join(SCHEMES)}")
    carried = given.get("transport_options") or {}
    if not isinstance(carried, Mapping):
        raise config_error(url, "option transport_options must be a dict", "fix transport_options")
    chosen = {key: value for key, value in carried.items() if key in OPTIONS}
    chosen.update((key, value) for key, value in given.items() if key != "transport_options")
    opts = Options(url, parts.query, chosen, OPTIONS)
    sentinel = parts.scheme.endswith("+sentinel")
    cluster = parts.scheme.endswith("+cluster")
    tls = parts.scheme.startswith("rediss")

    userinfo, _, netloc = parts.netloc.rpartition("@")
    username, _, password = (unquote(part) for part in userinfo.partition(":"))
    hosts = [_host_port(url, host, SCHEMES[parts.scheme]) for host in netloc.split(",")]
    if len(hosts) > 1 and not (sentinel or cluster):
        raise config_error(
            url, "it names several hosts", "use redis+sentinel:// or redis+cluster:// for them"
        )
    db = parts.path.strip("/") or "0"
    if not db.isdigit():
        raise config_error(url, f"the database {db!r} is not a number", "write /0, /1, ...")
    if cluster and int(db) != 0:
        raise config_error(
            url, f"Redis Cluster has only database 0, not {db}", "write /0 or leave it out"
        )

    timeout = opts.seconds("socket_timeout", DEFAULT_TIMEOUT_S)
    sockets: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": opts.seconds("socket_connect_timeout", timeout),
    }
    kwargs: dict[str, Any] = {
        **sockets,
        "username": username or None,
        "password": password or None,
        "decode_responses": True,
        **_tls(opts, tls),
    }
    replication = _replication(opts, timeout)
    secret = password or None
    master = opts.text("master_name")
    if not sentinel and (opts.given("master_name") or opts.given("sentinel_kwargs")):
        raise config_error(url, "master_name is for Sentinel", "use redis+sentinel://")
    no_retry = Retry(NoBackoff(), 0)
    if cluster:
        nodes = [ClusterNode(host, port) for host, port in hosts]

        def make_cluster() -> RedisCluster[str]:
            return RedisCluster(startup_nodes=nodes, retry=no_retry, **kwargs)

        return Connected(make_cluster, None, secret, replication)
    kwargs.update(db=int(db), retry=no_retry)
    if not sentinel:
        client = redis.Redis(host=hosts[0][0], port=hosts[0][1], **kwargs)
        return Connected(client, None, secret, replication)
    if master is None:
        raise config_error(url, "Sentinel needs a master name", "add ?master_name=mymaster")
    sentinels = Sentinel(
        hosts, sentinel_kwargs={**sockets, "retry": no_retry, **opts.mapping("sentinel_kwargs")}
    )
    return Connected(sentinels.master_for(master, **kwargs), sentinels, secret, replication)


def _replication(opts: Options, socket_timeout: float) -> Replication:
    """``min_replicas`` (a whole number, 0 by default) and ``min_replicas_timeout`` (seconds,
    1 by default), which must leave the socket time to hear WAIT's answer."""
    raw = opts.raw("min_replicas")
    replicas = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    if isinstance(raw, str) and raw.isascii() and raw.isdigit():
        replicas = int(raw)
    if raw is None:
        replicas = 0
    if replicas is None or replicas < 0:
        raise opts.error("min_replicas", f"a whole number of replicas, 0 or more, not {raw!r}")
    wait = opts.seconds("min_replicas_timeout", min(DEFAULT_REPLICAS_TIMEOUT_S, socket_timeout / 2))
    if wait >= socket_timeout:
        raise config_error(
            opts.url,
            f"min_replicas_timeout ({wait:g}s) must be shorter than socket_timeout "
            f"({socket_timeout:g}s), or the socket gives up before WAIT answers",
            "lower min_replicas_timeout or raise socket_timeout",
        )
    return Replication(replicas, max(1, round(wait * 1000)))


def _host_port(url: str, text: str, default_port: int) -> tuple[str, int]:
    try:
        parts = urlsplit(f"//{text}")
        return parts.hostname or "localhost", parts.port or default_port
    except ValueError:
        raise config_error(url, f"{text!r} is not host:port", "write host:port") from None


def _tls(opts: Options, tls: bool) -> dict[str, Any]:
    """redis-py's TLS keywords, from the options as redis-py and Celery spell them."""
    if not tls:
        given = [name for name in TLS_OPTIONS if opts.given(name)]
        if given:
            raise config_error(opts.url, f"{', '.join(given)} need TLS", "use rediss://")
        return {}
    reqs = _cert_reqs(opts)
    files = {name: opts.text(name) for name in ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")}
    for name, path in files.items():
        if path is not None and not Path(path).is_file():
            raise config_error(opts.url, f"{name} {path!r} is not a file", f"fix {name}")
    return {
        "ssl": True,
        "ssl_cert_reqs": reqs,
        "ssl_check_hostname": opts.flag("ssl_check_hostname", reqs != ssl.CERT_NONE),
        **files,
    }


def _cert_reqs(opts: Options) -> ssl.VerifyMode:
    """``ssl_cert_reqs`` as text (``required``, ``CERT_REQUIRED``...) or as Python's own
    ``ssl.CERT_*`` constant, the spelling Celery's documentation uses."""
    raw = opts.raw("ssl_cert_reqs")
    if isinstance(raw, ssl.VerifyMode):
        return raw
    reqs = (opts.text("ssl_cert_reqs") or "required").lower()
    if reqs not in CERT_REQS:
        raise opts.error("ssl_cert_reqs", "required, optional or none (or ssl.CERT_REQUIRED, ...)")
    return CERT_REQS[reqs]
