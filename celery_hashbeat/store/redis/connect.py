"""From ``hashbeat_store_url`` and its options to a connection: plain, TLS, Sentinel, Cluster.

Every check of the URL and the options is made here, up front, so that a wrong setting fails when
the store is built and names what to fix; the connection itself is made on first use. RedisStore
(store/redis/store.py) takes the Connection that ``connect`` returns and speaks the protocol over
it.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.commands.core import Script
from redis.exceptions import RedisClusterException
from redis.retry import Retry
from redis.sentinel import Sentinel

from celery_hashbeat.store.options import DEFAULT_TIMEOUT_S, Options, config_error, mask_url
from celery_hashbeat.store.redis.errors import SLOTS_MOVED_REPLIES, translate

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


class Connection:
    """The store's one way to Redis: the client every command goes through, the one server that
    holds every key, the scripts, and redis-py's errors in the protocol's words.

    Made by ``connect``, which checks the URL; nothing connects until the first command.
    """

    def __init__(
        self,
        url: str,
        client: redis.Redis[str] | Callable[[], RedisCluster[str]],
        sentinel: Sentinel | None,
        secret: str | None,
        replication: Replication,
        home_key: str,
    ) -> None:
        #: The URL with any password masked: safe to log.
        self.url = mask_url(url)
        #: What ``min_replicas`` asks of each claim.
        self.replication = replication
        self._sentinel = sentinel
        #: The password, kept out of every message.
        self._secret = secret
        #: A key of the prefix: its hash tag's cluster slot holds every key.
        self._home_key = home_key
        self._plain: redis.Redis[str] | None = None
        # redis-py's cluster client connects as it is built, so it is made on first use.
        self._make_cluster: Callable[[], RedisCluster[str]] | None = None
        if isinstance(client, redis.Redis):
            self._plain = client
        else:
            self._make_cluster = client
        self._cluster: RedisCluster[str] | None = None
        #: The cluster's slot map may be out of date (a node failed or a slot moved).
        self._stale = False
        # A client that never connects, only to encode the scripts; each call names its client.
        self._encoder: redis.Redis[str] = redis.Redis(decode_responses=True)

    @property
    def client(self) -> Any:
        """The client every plain command goes through: redis-py's Redis (plain or Sentinel's
        master) or RedisCluster, made on first use."""
        if self._plain is not None:
            return self._plain
        if self._cluster is None:
            assert self._make_cluster is not None
            self._cluster = self._make_cluster()
        return self._cluster

    def node(self) -> redis.Redis[str]:
        """A client of the one server that holds every key: the master itself, or the cluster
        node that serves the hash tag's slot. Commands that must share one connection (a
        pipeline, a claim and its WAIT) or that have no key of their own (TIME) go here."""
        if self._plain is not None:
            return self._plain
        cluster: RedisCluster[str] = self.client
        if self._stale:
            self._stale = False
            cluster.nodes_manager.initialize()
        node = cluster.get_node_from_key(self._home_key)
        if node is None:
            raise RedisClusterException(f"no node serves the slot of {self._home_key}")
        client: redis.Redis[str] = cluster.get_redis_connection(node)
        return client

    def script(self, text: str) -> Script:
        """A script of store/redis/scripts/, run by EVALSHA (loaded again if the server lost
        it)."""
        return Script(self._encoder, text)

    def run(self, script: Script, keys: list[str], args: list[str | int]) -> Any:
        """Run a script through ``client``, its errors in the protocol's words."""
        with self.talking():
            return script(keys=keys, args=args, client=self.client)

    def run_replicated(self, script: Script, keys: list[str], args: list[str | int]) -> Any:
        """Run a script and, where ``min_replicas`` asks for replicas, WAIT for them: the
        answer and how many replicas hold the script's writes (0 when none are asked for)."""
        wanted = self.replication.replicas
        with self.talking():
            if not wanted:
                return script(keys=keys, args=args, client=self.client), 0
            # WAIT counts the replicas holding this connection's writes, so it goes down the
            # same connection as the script, right behind it.
            pipe = self.node().pipeline(transaction=False)
            script(keys=keys, args=args, client=pipe)
            pipe.execute_command("WAIT", wanted, self.replication.timeout_ms)  # type: ignore[no-untyped-call]
            answer, acked = pipe.execute()
            return answer, int(acked)

    @contextmanager
    def talking(self) -> Iterator[None]:
        """Turn redis-py's errors into the protocol's, worded for whoever reads the log."""
        try:
            yield
        except (redis.RedisError, RedisClusterException) as exc:
            moved = str(exc).startswith(SLOTS_MOVED_REPLIES)
            if self._plain is None and (moved or not isinstance(exc, redis.ResponseError)):
                self._stale = True
            raise translate(exc, self.url, self._secret, self._plain is None) from exc

    def close(self) -> None:
        if self._plain is not None:
            self._plain.close()
            self._plain.connection_pool.disconnect()
        if self._cluster is not None:
            self._cluster.close()
        for sentinel in self._sentinel.sentinels if self._sentinel else ():
            sentinel.close()


def connect(url: str, given: Mapping[str, object], home_key: str) -> Connection:
    """Check everything about the URL and options up front; connect lazily, on first use.
    ``home_key`` is any key of the store's prefix (see Connection)."""
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

        return Connection(url, make_cluster, None, secret, replication, home_key)
    kwargs.update(db=int(db), retry=no_retry)
    if not sentinel:
        client = redis.Redis(host=hosts[0][0], port=hosts[0][1], **kwargs)
        return Connection(url, client, None, secret, replication, home_key)
    if master is None:
        raise config_error(url, "Sentinel needs a master name", "add ?master_name=mymaster")
    sentinels = Sentinel(
        hosts, sentinel_kwargs={**sockets, "retry": no_retry, **opts.mapping("sentinel_kwargs")}
    )
    master_client = sentinels.master_for(master, **kwargs)
    return Connection(url, master_client, sentinels, secret, replication, home_key)


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
