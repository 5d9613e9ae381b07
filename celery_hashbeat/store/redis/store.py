"""The HA store: Redis (plain, TLS, Sentinel or Cluster), every multi-step change one Lua script.

All keys share the hash tag ``{<prefix>}`` so that one Redis Cluster slot holds them and a script
may touch them together (a script that builds a key from a declared key's prefix, such as
``{p}:running:<entry>``, stays in that slot, since the hash tag comes first):

- ``{p}:leader``: the leader's token, with the lease TTL as the key's expiry;
- ``{p}:fired``: a hash, entry name -> its fence (``slot|token|previous|fingerprint``, see
  store/base.py);
- ``{p}:runs``: a hash, entry name -> its run count, changed by the scripts that change fences;
- ``{p}:beats``: a hash, beat token -> ``role|last_seen_ms|expires_ms|d<schedule digest>`` in the
  server's clock;
- ``{p}:running:<entry>``: the entry's run lease, the task id, with the run TTL as its expiry;
- ``{p}:roster``: ``<resolved ms>|<JSON list of worker nodes>``;
- ``{p}:balance``: the leader's balanced assignment, JSON (DESIGN.md §16);
- ``{p}:history:<entry>``: a list, the entry's newest outcomes first, trimmed to HISTORY_CAP;
- the runtime controls' keys (store/redis_controls.py).

The scripts themselves are in store/redis_scripts.py; the URL and its options become a client in
store/redis_connect.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import RedisClusterException

from celery_hashbeat.store.base import (
    HISTORY_CAP,
    BeatInfo,
    Claimed,
    Fence,
    History,
    LeaseInfo,
    RunGuard,
    Store,
    StoreAuthError,
    StoreError,
    StoreUnavailable,
)
from celery_hashbeat.store.options import (
    check_digest,
    check_guard,
    check_prefix,
    check_token,
    check_ttl,
    mask_url,
)
from celery_hashbeat.store.redis.connect import _connect
from celery_hashbeat.store.redis.controls import RedisControlRecords
from celery_hashbeat.store.redis.scripts import (
    ANCHOR_SCRIPT,
    CLAIM_SCRIPT,
    FORGET_SCRIPT,
    HEARTBEAT_SCRIPT,
    HOLD_RUN_SCRIPT,
    RECORD_SCRIPT,
    RELEASE_RUN_SCRIPT,
    RELEASE_SCRIPT,
    RENEW_RUNS_SCRIPT,
    RENEW_SCRIPT,
    SHARE_SCRIPT,
    UNCLAIM_SCRIPT,
)

#: A heartbeat's value; the digest (any text without "|") is marked with "d" so that no role,
#: however spelled, is misread.
BEAT_VALUE = re.compile(r"^(?P<role>.*)\|(?P<seen>\d+)\|(?P<expires>\d+)(?:\|d(?P<digest>[^|]*))?$")

# Server replies that mean "not now" rather than "never": retrying later can succeed.
# MOVED, ASK and CLUSTERDOWN come from a Redis Cluster whose slots are moving (a failover).
TRANSIENT_REPLIES = (
    "BUSY",
    "LOADING",
    "MASTERDOWN",
    "READONLY",
    "OOM",
    "MISCONF",
    "TRYAGAIN",
    "MOVED",
    "ASK",
    "CLUSTERDOWN",
)

#: How redis-py words a refused login inside a cluster client's "cannot be connected" error.
CLUSTER_AUTH_WORDING = (
    "invalid username-password pair",
    "Authentication required",
    "WRONGPASS",
    "NOAUTH",
    "NOPERM",
)


class RedisStore(RedisControlRecords, Store):
    """The coordination protocol on Redis.

    Options, in the URL's query or as keywords (keywords win): ``socket_timeout`` and
    ``socket_connect_timeout`` (seconds, default 3), ``ssl_cert_reqs`` (``required`` by default,
    ``optional``, ``none``, or Celery's ``CERT_*`` spelling), ``ssl_ca_certs``, ``ssl_certfile``,
    ``ssl_keyfile``, ``ssl_check_hostname`` (``rediss://`` only), ``master_name`` and
    ``sentinel_kwargs`` (Sentinel only; the latter a dict of connection options for the
    sentinels themselves), ``min_replicas`` (replicas that must hold a claim before it is
    reported claimed, default 0) and ``min_replicas_timeout`` (seconds to wait for them, default
    1 or half of ``socket_timeout``). ``transport_options``, Celery's dict of broker options,
    supplies any of these it holds and its other keys are ignored.

    ``redis+cluster://host:port[,host:port...]`` (database 0 only) goes through redis-py's
    RedisCluster, made on first use; every key is in the one slot of the hash tag.

    Commands are never retried behind the caller's back: a claim that timed out may have run, and
    running it again would report its own slots as taken. A claim that fewer than
    ``min_replicas`` replicas acknowledge raises StoreUnavailable: it was made, but must not be
    published, and the caller retries it as a claim whose reply was lost.
    """

    def __init__(self, url: str, prefix: str = "hashbeat", **options: object) -> None:
        self.url = mask_url(url)
        check_prefix(prefix)
        self._leader = f"{{{prefix}}}:leader"
        self._fired = f"{{{prefix}}}:fired"
        self._runs = f"{{{prefix}}}:runs"
        self._beats = f"{{{prefix}}}:beats"
        self._running = f"{{{prefix}}}:running:"
        self._shared = f"{{{prefix}}}:"
        self._history = f"{{{prefix}}}:history:"
        connected = _connect(url, options)
        self._sentinel, self._secret = connected.sentinel, connected.secret
        self._replication = connected.replication
        self._plain: redis.Redis[str] | None = None
        self._make_cluster: Callable[[], RedisCluster[str]] | None = None
        if isinstance(connected.client, redis.Redis):
            self._plain = connected.client
        else:
            self._make_cluster = connected.client
        self._cluster: RedisCluster[str] | None = None
        #: The cluster's slot map may be out of date (a node failed or a slot moved).
        self._stale = False
        # A client that never connects, only to encode the scripts; each call names its client.
        encoder: redis.Redis[str] = redis.Redis(decode_responses=True)
        self._renew = Script(encoder, RENEW_SCRIPT)
        self._release = Script(encoder, RELEASE_SCRIPT)
        self._claim = Script(encoder, CLAIM_SCRIPT)
        self._unclaim = Script(encoder, UNCLAIM_SCRIPT)
        self._anchor = Script(encoder, ANCHOR_SCRIPT)
        self._forget = Script(encoder, FORGET_SCRIPT)
        self._heartbeat = Script(encoder, HEARTBEAT_SCRIPT)
        self._hold_run = Script(encoder, HOLD_RUN_SCRIPT)
        self._renew_runs = Script(encoder, RENEW_RUNS_SCRIPT)
        self._release_run = Script(encoder, RELEASE_RUN_SCRIPT)
        self._share = Script(encoder, SHARE_SCRIPT)
        self._record = Script(encoder, RECORD_SCRIPT)
        self._init_controls(prefix)

    @property
    def _client(self) -> Any:
        """The client every plain command goes through: redis-py's Redis (plain or Sentinel's
        master) or RedisCluster, made on first use."""
        if self._plain is not None:
            return self._plain
        if self._cluster is None:
            assert self._make_cluster is not None
            self._cluster = self._make_cluster()
        return self._cluster

    def _node(self) -> redis.Redis[str]:
        """A client of the one server that holds every key: the master itself, or the cluster
        node that serves the hash tag's slot. Commands that must share one connection (a
        pipeline, a claim and its WAIT) or that have no key of their own (TIME) go here."""
        if self._plain is not None:
            return self._plain
        cluster: RedisCluster[str] = self._client
        if self._stale:
            self._stale = False
            cluster.nodes_manager.initialize()
        node = cluster.get_node_from_key(self._leader)
        if node is None:
            raise RedisClusterException(f"no node serves the slot of {self._leader}")
        client: redis.Redis[str] = cluster.get_redis_connection(node)
        return client

    def _run(self, script: Script, keys: list[str], args: list[str | int]) -> Any:
        return script(keys=keys, args=args, client=self._client)

    def acquire(self, token: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        check_token(token)
        with self._talking():
            if self._client.set(self._leader, token, nx=True, px=ttl_ms):
                return True
            return bool(self._client.get(self._leader) == token)

    def renew(self, token: str, ttl_ms: int, history: History = ()) -> bool:
        check_ttl(ttl_ms)
        args: list[str | int] = [token, ttl_ms, HISTORY_CAP, *_flat(history)]
        with self._talking():
            return bool(self._run(self._renew, [self._leader, self._history], args))

    def release(self, token: str) -> bool:
        with self._talking():
            return bool(self._run(self._release, [self._leader, self._beats], [token]))

    def leader(self) -> LeaseInfo | None:
        with self._talking():
            pipe = self._node().pipeline(transaction=True)
            token, ttl_left = pipe.get(self._leader).pttl(self._leader).execute()
        return None if token is None or ttl_left < 0 else LeaseInfo(token, ttl_left)

    def claim(
        self,
        token: str,
        slots: Mapping[str, tuple[int, str]],
        runs: Mapping[str, RunGuard] | None = None,
        history: History = (),
    ) -> Claimed:
        check_token(token)
        if not slots:
            if history:
                self.record(history)
            return Claimed()
        runs = runs or {}
        recorded = _flat(history)
        args: list[str | int] = [token, HISTORY_CAP, len(recorded), *recorded]
        records = []
        for entry, (slot, fingerprint) in slots.items():
            guard = runs.get(entry)
            if guard is None:
                fields = f"{int(slot)}||||{fingerprint}"
            else:
                check_guard(guard)
                fields = f"{int(slot)}|{guard.mode}|{guard.ttl_ms}|{guard.task_id}|{fingerprint}"
            name = entry.encode()
            record = f"{len(name)}:{entry}{fields}"
            records.append(f"{len(record.encode())}:{record}")
        args.append("".join(records))
        keys = [self._leader, self._fired, self._running, self._history, self._runs]
        wanted = self._replication.replicas
        with self._talking():
            if wanted:
                # WAIT counts the replicas holding this connection's writes, so it goes down the
                # same connection as the claim, right behind it.
                pipe = self._node().pipeline(transaction=False)
                self._claim(keys=keys, args=args, client=pipe)
                pipe.execute_command("WAIT", wanted, self._replication.timeout_ms)  # type: ignore[no-untyped-call]
                answered, acked = pipe.execute()
            else:
                answered, acked = self._run(self._claim, keys, args), 0
        if answered == 0:
            return Claimed()  # the lease is not the caller's: nothing claimed
        answers = dict(zip(answered[::2], answered[1::2], strict=True))
        claimed = [
            entry
            for entry in slots
            if answers.get(entry, "") != "!" and not answers.get(entry, "").startswith("-")
        ]
        if claimed and acked < wanted:
            # Not published: to the caller this is a claim whose reply was lost; retried, the
            # claim is recognised as its own and waited for again (DESIGN.md §10).
            raise StoreUnavailable(
                f"Redis store {self.url}: a claim of {len(claimed)} slot(s) reached {acked} "
                f"replica(s) within {self._replication.timeout_ms} ms, not the {wanted} that "
                "hashbeat_store_min_replicas asks for, so a failover could lose it; its slots are "
                "not sent and the claim is retried (bring the replicas back, or lower "
                "hashbeat_store_min_replicas)"
            )
        held = {entry: answer.removeprefix("-") for entry, answer in answers.items()}
        return Claimed(claimed, {entry: holder for entry, holder in held.items() if holder != "!"})

    def unclaim(
        self, token: str, slots: Mapping[str, int], runs: Mapping[str, str] | None = None
    ) -> set[str]:
        if not slots:
            return set()
        runs = runs or {}
        args: list[str | int] = [token]
        for entry, slot in slots.items():
            args += (entry, int(slot), runs.get(entry, ""))
        with self._talking():
            keys = [self._leader, self._fired, self._running, self._runs]
            return set(self._run(self._unclaim, keys, args))

    def anchor(self, token: str, anchors: Mapping[str, tuple[int, str]]) -> dict[str, Fence]:
        if not anchors:
            return {}
        args: list[str | int] = [token]
        for entry, (instant, fingerprint) in anchors.items():
            args += (entry, int(instant), fingerprint)
        with self._talking():
            flat = self._run(self._anchor, [self._leader, self._fired], args)
        pairs = iter(flat)
        return self._parse_fences(zip(pairs, pairs, strict=True))

    def fences(self, entries: Iterable[str] | None = None) -> dict[str, Fence]:
        with self._talking():
            if entries is None:
                pipe = self._node().pipeline()
                stored: dict[str, str]
                stored, counted = pipe.hgetall(self._fired).hgetall(self._runs).execute()
            else:
                names = list(entries)
                if not names:
                    return {}
                pipe = self._node().pipeline()
                values, runs = pipe.hmget(self._fired, names).hmget(self._runs, names).execute()
                stored = {
                    name: value
                    for name, value in zip(names, values, strict=True)
                    if value is not None
                }
                counted = {name: n for name, n in zip(names, runs, strict=True) if n is not None}
        counts = {name: int(n) for name, n in counted.items() if n.isdigit()}
        return self._parse_fences(stored.items(), counts)

    def forget(self, token: str, entries: Iterable[str]) -> bool:
        names = list(entries)
        with self._talking():  # even with nothing to drop: the answer says if the lease is held
            keys = [self._leader, self._fired, self._runs]
            return bool(self._run(self._forget, keys, [token, *names]))

    def hold_run(self, entry: str, task_id: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        with self._talking():
            return bool(self._run(self._hold_run, [self._running + entry], [task_id, ttl_ms]))

    def renew_runs(self, runs: Mapping[str, str], ttl_ms: int) -> set[str]:
        check_ttl(ttl_ms)
        if not runs:
            return set()
        args: list[str | int] = [ttl_ms]
        for entry, task_id in runs.items():
            args += (entry, task_id)
        with self._talking():
            return set(self._run(self._renew_runs, [self._running], args))

    def release_run(self, entry: str, task_id: str) -> bool:
        with self._talking():
            return bool(self._run(self._release_run, [self._running + entry], [task_id]))

    def running(self, entries: Iterable[str] | None = None) -> dict[str, str]:
        with self._talking():
            node = self._node()  # every run lease is in the one slot: no cluster-wide scan
            if entries is None:
                keys = list(node.scan_iter(match=_glob(self._running) + "*", count=1000))
                names = [key[len(self._running) :] for key in keys]
            else:
                names = list(entries)
                keys = [self._running + name for name in names]
            values = node.mget(keys) if keys else []
        return {name: value for name, value in zip(names, values, strict=True) if value is not None}

    def shared(self, name: str) -> str | None:
        with self._talking():
            value: str | None = self._client.get(self._shared + name)
        return value

    def share(self, token: str, name: str, value: str) -> bool:
        with self._talking():
            return bool(self._run(self._share, [self._leader, self._shared + name], [token, value]))

    def record(self, history: History) -> None:
        if not history:
            return
        with self._talking():
            self._run(self._record, [self._history], [HISTORY_CAP, *_flat(history)])

    def history(self, entry: str, limit: int = HISTORY_CAP) -> list[str]:
        if limit <= 0:
            return []
        with self._talking():
            return list(self._client.lrange(self._history + entry, 0, limit - 1))

    def heartbeat(self, token: str, role: str, ttl_ms: int, schedule_digest: str = "") -> None:
        check_ttl(ttl_ms)
        check_digest(schedule_digest)
        with self._talking():
            self._run(self._heartbeat, [self._beats], [token, role, ttl_ms, schedule_digest])

    def beats(self) -> list[BeatInfo]:
        with self._talking():
            pipe = self._node().pipeline(transaction=True)
            (seconds, micros), stored = pipe.time().hgetall(self._beats).execute()
        now = seconds * 1000 + micros // 1000
        seen = []
        for token, value in stored.items():
            match = BEAT_VALUE.match(value)
            if match is not None and int(match["expires"]) > now:
                seen.append(
                    BeatInfo(token, int(match["seen"]), match["role"], match["digest"] or "")
                )
        return sorted(seen, key=lambda beat: (-beat.last_seen_ms, beat.token))

    def ping(self) -> None:
        with self._talking():
            self._node().ping()

    def close(self) -> None:
        if self._plain is not None:
            self._plain.close()
            self._plain.connection_pool.disconnect()
        if self._cluster is not None:
            self._cluster.close()
        for sentinel in self._sentinel.sentinels if self._sentinel else ():
            sentinel.close()

    @contextmanager
    def _talking(self) -> Iterator[None]:
        """Turn redis-py's errors into the protocol's, worded for whoever reads the log."""
        try:
            yield
        except (redis.RedisError, RedisClusterException) as exc:
            moved = str(exc).startswith(("MOVED", "ASK", "CLUSTERDOWN"))
            if self._plain is None and (moved or not isinstance(exc, redis.ResponseError)):
                self._stale = True
            raise self._translate(exc) from exc

    def _translate(self, exc: redis.RedisError | RedisClusterException) -> StoreError:
        text = str(exc) or type(exc).__name__
        if self._secret:
            text = text.replace(self._secret, "***")
        auth_errors = (
            redis.AuthenticationError,
            redis.AuthenticationWrongNumberOfArgsError,
            redis.exceptions.NoPermissionError,
        )
        # redis-py's cluster client reports a refused login as "cannot be connected", in words.
        refused = isinstance(exc, RedisClusterException) and any(
            words in text for words in CLUSTER_AUTH_WORDING
        )
        if (
            refused
            or isinstance(exc, auth_errors)
            or text.startswith(("WRONGPASS", "NOAUTH", "NOPERM"))
        ):
            example = (
                "redis+cluster://user:password@host:port,host:port"
                if self._plain is None
                else "redis://user:password@host:port/db"
            )
            return StoreAuthError(
                f"Redis store {self.url} refused the credentials ({text}): set the right user and "
                f"password in hashbeat_store_url ({example})"
            )
        transient = (
            redis.ConnectionError,
            redis.TimeoutError,
            redis.exceptions.ReadOnlyError,
            redis.exceptions.ClusterError,
            RedisClusterException,
        )
        if isinstance(exc, transient) or text.startswith(TRANSIENT_REPLIES):
            return StoreUnavailable(f"Redis store {self.url} is not answering ({text}); will retry")
        return StoreError(f"Redis store {self.url} failed: {type(exc).__name__}: {text}")


def _flat(history: History) -> list[str]:
    """(entry, record) pairs as the scripts read them: entry, record, entry, record..."""
    return [text for pair in history for text in pair]


def _glob(text: str) -> str:
    """``text`` with the glob characters of Redis' MATCH escaped (a prefix may hold any)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)
