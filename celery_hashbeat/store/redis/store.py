"""The HA store: Redis (plain, TLS, Sentinel or Cluster), every multi-step change one Lua script.

Its parts, each in its own module of store/redis/: the key names (keys.py), the scripts with
what each guarantees (scripts/), the URL made a connection (connect.py) and redis-py's errors
in the protocol's words (errors.py), the runtime controls (controls.py). This module speaks the
protocol (store/base.py) over them: the lease, fenced claims, run leases, shared documents,
history and heartbeats.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from celery_hashbeat.store import retention
from celery_hashbeat.store.base import HANDOVER_KEEP_MS, HISTORY_CAP, History, Store
from celery_hashbeat.store.errors import ReplicasBehind
from celery_hashbeat.store.options import (
    check_digest,
    check_guard,
    check_prefix,
    check_token,
    check_ttl,
)
from celery_hashbeat.store.redis.connect import connect
from celery_hashbeat.store.redis.controls import RedisControlRecords
from celery_hashbeat.store.redis.keys import Keys
from celery_hashbeat.store.redis.operations import RedisOperatorRecords
from celery_hashbeat.store.redis.scripts.claims import (
    ANCHOR_SCRIPT,
    CLAIM_SCRIPT,
    FORGET_SCRIPT,
    HAND_OVER_SCRIPT,
    TAKE_HANDED_SCRIPT,
    UNCLAIM_SCRIPT,
)
from celery_hashbeat.store.redis.scripts.history import RECORD_SCRIPT, RETIRE_HISTORY_SCRIPT
from celery_hashbeat.store.redis.scripts.lease import (
    HEARTBEAT_SCRIPT,
    RELEASE_SCRIPT,
    RENEW_SCRIPT,
    SHARE_SCRIPT,
)
from celery_hashbeat.store.redis.scripts.runs import (
    HOLD_RUN_SCRIPT,
    RELEASE_RUN_SCRIPT,
    RENEW_RUNS_SCRIPT,
)
from celery_hashbeat.store.redis.sent import RedisSentRecords
from celery_hashbeat.store.sent import SENT_CAP, SENT_KEEP_MS
from celery_hashbeat.store.values import BeatInfo, Claimed, Fence, LeaseInfo, RunGuard

#: A heartbeat's value; the digest (any text without "|") is marked with "d" so that no role,
#: however spelled, is misread.
BEAT_VALUE = re.compile(r"^(?P<role>.*)\|(?P<seen>\d+)\|(?P<expires>\d+)(?:\|d(?P<digest>[^|]*))?$")


class RedisStore(Store):
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
        check_prefix(prefix)
        self._keys = Keys(prefix)
        self._redis = connect(url, options, self._keys.leader)
        super().__init__(
            self._redis.url,
            RedisControlRecords(self._redis, self._keys),
            RedisOperatorRecords(self._redis, self._keys),
            RedisSentRecords(self._redis, self._keys),
        )
        script = self._redis.script
        self._renew = script(RENEW_SCRIPT)
        self._release = script(RELEASE_SCRIPT)
        self._claim = script(CLAIM_SCRIPT)
        self._unclaim = script(UNCLAIM_SCRIPT)
        self._anchor = script(ANCHOR_SCRIPT)
        self._hand_over = script(HAND_OVER_SCRIPT)
        self._take_handed = script(TAKE_HANDED_SCRIPT)
        self._forget = script(FORGET_SCRIPT)
        self._heartbeat = script(HEARTBEAT_SCRIPT)
        self._hold_run = script(HOLD_RUN_SCRIPT)
        self._renew_runs = script(RENEW_RUNS_SCRIPT)
        self._release_run = script(RELEASE_RUN_SCRIPT)
        self._share = script(SHARE_SCRIPT)
        self._record = script(RECORD_SCRIPT)
        self._retire_history = script(RETIRE_HISTORY_SCRIPT)

    def acquire(self, token: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        check_token(token)
        with self._redis.talking():
            if self._redis.client.set(self._keys.leader, token, nx=True, px=ttl_ms):
                return True
            return bool(self._redis.client.get(self._keys.leader) == token)

    def renew(self, token: str, ttl_ms: int, history: History = ()) -> bool:
        check_ttl(ttl_ms)
        args: list[str | int] = [token, ttl_ms, HISTORY_CAP, *_flat(history)]
        return bool(
            self._redis.run(self._renew, [self._keys.leader, self._keys.history_prefix], args)
        )

    def release(self, token: str) -> bool:
        return bool(self._redis.run(self._release, [self._keys.leader, self._keys.beats], [token]))

    def leader(self) -> LeaseInfo | None:
        with self._redis.talking():
            pipe = self._redis.node().pipeline(transaction=True)
            token, ttl_left = pipe.get(self._keys.leader).pttl(self._keys.leader).execute()
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
        args += ("".join(records), HANDOVER_KEEP_MS, SENT_KEEP_MS, SENT_CAP)
        keys = [
            self._keys.leader,
            self._keys.fired,
            self._keys.running_prefix,
            self._keys.history_prefix,
            self._keys.runs,
            self._keys.claimed,
            self._keys.sent,
            self._keys.sent_since,
        ]
        replication = self._redis.replication
        wanted = replication.replicas
        answered, acked = self._redis.run_replicated(self._claim, keys, args)
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
            # claim is recognised as its own and waited for again (docs/design.md §10).
            raise ReplicasBehind(
                f"Redis store {self.url}: a claim of {len(claimed)} slot(s) reached {acked} "
                f"replica(s) within {replication.timeout_ms} ms, not the {wanted} that "
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
        keys = [self._keys.leader, self._keys.fired, self._keys.running_prefix, self._keys.runs]
        return set(self._redis.run(self._unclaim, [*keys, self._keys.sent], args))

    def hand_over(self, token: str, slots: Iterable[tuple[str, int]]) -> set[tuple[str, int]]:
        check_token(token)
        args: list[str | int] = [token]
        for entry, slot in slots:
            args += (entry, int(slot))
        if len(args) == 1:
            return set()
        keys = [self._keys.fired, self._keys.claimed, self._keys.handed]
        flat = self._redis.run(self._hand_over, keys, args)
        return {(entry, int(slot)) for entry, slot in zip(flat[::2], flat[1::2], strict=True)}

    def take_handed(self, token: str) -> list[tuple[str, int]]:
        check_token(token)
        keys = [self._keys.leader, self._keys.handed, self._keys.claimed]
        replication = self._redis.replication
        members, acked = self._redis.run_replicated(self._take_handed, keys, [token])
        taken = sorted(map(_slot_and_entry, members))
        if taken and acked < replication.replicas:
            # Taking them must survive a failover, or the next leader would send them too.
            self.hand_over(token, ((entry, slot) for slot, entry in taken))
            raise ReplicasBehind(
                f"Redis store {self.url}: taking {len(taken)} handed-over slot(s) reached "
                f"{acked} replica(s), not the {replication.replicas} that "
                "hashbeat_store_min_replicas asks for; they are handed over again and not sent yet"
            )
        return [(entry, slot) for slot, entry in taken]

    def anchor(self, token: str, anchors: Mapping[str, tuple[int, str]]) -> dict[str, Fence]:
        if not anchors:
            return {}
        args: list[str | int] = [token]
        for entry, (instant, fingerprint) in anchors.items():
            args += (entry, int(instant), fingerprint)
        flat = self._redis.run(self._anchor, [self._keys.leader, self._keys.fired], args)
        pairs = iter(flat)
        return self._parse_fences(zip(pairs, pairs, strict=True))

    def fences(self, entries: Iterable[str] | None = None) -> dict[str, Fence]:
        with self._redis.talking():
            if entries is None:
                pipe = self._redis.node().pipeline()
                stored: dict[str, str]
                stored, counted = pipe.hgetall(self._keys.fired).hgetall(self._keys.runs).execute()
            else:
                names = list(entries)
                if not names:
                    return {}
                pipe = self._redis.node().pipeline()
                values, runs = (
                    pipe.hmget(self._keys.fired, names).hmget(self._keys.runs, names).execute()
                )
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
        # Run even with nothing to drop: the answer says whether the lease is held.
        keys = [self._keys.leader, self._keys.fired, self._keys.runs]
        forgotten = bool(self._redis.run(self._forget, keys, [token, *names]))
        if forgotten and names:
            self._retire(names)
        return forgotten

    def _retire(self, names: list[str]) -> None:
        """What is kept of forgotten entries lives GONE_TTL_MS more (store/retention.py)."""
        args: list[str | int] = [retention.GONE_TTL_MS, *names]
        self._redis.run(self._retire_history, [self._keys.history_prefix], args)

    def hold_run(self, entry: str, task_id: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        return bool(self._redis.run(self._hold_run, [self._keys.running(entry)], [task_id, ttl_ms]))

    def renew_runs(self, runs: Mapping[str, str], ttl_ms: int) -> set[str]:
        check_ttl(ttl_ms)
        if not runs:
            return set()
        args: list[str | int] = [ttl_ms]
        for entry, task_id in runs.items():
            args += (entry, task_id)
        return set(self._redis.run(self._renew_runs, [self._keys.running_prefix], args))

    def release_run(self, entry: str, task_id: str) -> bool:
        return bool(self._redis.run(self._release_run, [self._keys.running(entry)], [task_id]))

    def running(self, entries: Iterable[str] | None = None) -> dict[str, str]:
        with self._redis.talking():
            # Every run lease is in the one slot: no cluster-wide scan.
            node = self._redis.node()
            if entries is None:
                keys = list(
                    node.scan_iter(match=_glob(self._keys.running_prefix) + "*", count=1000)
                )
                names = [key[len(self._keys.running_prefix) :] for key in keys]
            else:
                names = list(entries)
                keys = [self._keys.running(name) for name in names]
            values = node.mget(keys) if keys else []
        return {name: value for name, value in zip(names, values, strict=True) if value is not None}

    def shared(self, name: str) -> str | None:
        with self._redis.talking():
            value: str | None = self._redis.client.get(self._keys.shared(name))
        return value

    def share(self, token: str, name: str, value: str) -> bool:
        return bool(
            self._redis.run(
                self._share, [self._keys.leader, self._keys.shared(name)], [token, value]
            )
        )

    def record(self, history: History) -> None:
        if not history:
            return
        self._redis.run(self._record, [self._keys.history_prefix], [HISTORY_CAP, *_flat(history)])

    def history(self, entry: str, limit: int = HISTORY_CAP) -> list[str]:
        if limit <= 0:
            return []
        with self._redis.talking():
            return list(self._redis.client.lrange(self._keys.history(entry), 0, limit - 1))

    def heartbeat(self, token: str, role: str, ttl_ms: int, schedule_digest: str = "") -> None:
        check_ttl(ttl_ms)
        check_digest(schedule_digest)
        args: list[str | int] = [token, role, ttl_ms, schedule_digest]
        self._redis.run(self._heartbeat, [self._keys.beats], args)

    def beats(self) -> list[BeatInfo]:
        with self._redis.talking():
            pipe = self._redis.node().pipeline(transaction=True)
            (seconds, micros), stored = pipe.time().hgetall(self._keys.beats).execute()
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
        with self._redis.talking():
            self._redis.node().ping()

    def close(self) -> None:
        self._redis.close()


def _flat(history: History) -> list[str]:
    """(entry, record) pairs as the scripts read them: entry, record, entry, record..."""
    return [text for pair in history for text in pair]


def _glob(text: str) -> str:
    """``text`` with the glob characters of Redis' MATCH escaped (a prefix may hold any)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _slot_and_entry(member: str) -> tuple[int, str]:
    """A handed-over slot, stored as ``<slot>|<entry>`` (a name may hold "|")."""
    slot, _, entry = member.partition("|")
    return int(slot), entry
