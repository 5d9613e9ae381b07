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
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Iterable, Iterator, Mapping
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

from ._util import (
    DEFAULT_TIMEOUT_S,
    Options,
    check_digest,
    check_guard,
    check_prefix,
    check_token,
    check_ttl,
    config_error,
    mask_url,
)
from .base import (
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
from .redis_controls import RedisControls

# Appends (entry, record) pairs taken from ARGV[first..] to the entries' history lists and trims
# each to the cap, so a history never grows past it; shared by the scripts that carry history.
RECORD_HISTORY = """
local function record(prefix, cap, first, last)
  for i = first, last, 2 do
    redis.call('LPUSH', prefix .. ARGV[i], ARGV[i + 1])
    redis.call('LTRIM', prefix .. ARGV[i], 0, cap - 1)
  end
end
"""

# Records history (ARGV[1] the cap, ARGV[2..] the pairs) and nothing else.
RECORD_SCRIPT = (
    RECORD_HISTORY
    + """
record(KEYS[1], tonumber(ARGV[1]), 2, #ARGV)
return 1
"""
)

# Records the history it carries (ARGV[3] the cap, ARGV[4..] the pairs), then extends the lease
# only while the caller's token holds it, so a deposed leader cannot revive it.
RENEW_SCRIPT = (
    RECORD_HISTORY
    + """
record(KEYS[2], tonumber(ARGV[3]), 4, #ARGV)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
)

# Deletes the lease and the caller's heartbeat only while the caller's token holds the lease, so a
# late release spares a successor and a stopped beat is not listed as leader.
RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# The fence format (store/base.py), parsed the same way by every script below and as
# base.parse_stored does: slot text, token, previous and fingerprint, or nil for a value that does
# not parse (treated as absent, so no script ever errors out on a stored value).
PARSE_FENCE = """
local function parse(value)
  if not value then return nil end
  if string.match(value, '^%d+$') then return value, '-', '', '' end
  local slot, token, previous, fingerprint = string.match(value, '^(%d+)|([^|]*)|([^|]*)|(.*)$')
  if previous and previous ~= '' and not string.match(previous, '^a?%d+$') then return nil end
  return slot, token, previous, fingerprint
end
"""

# Records the history it carries (ARGV[2] the cap, ARGV[3] how many history arguments follow),
# then, under one lease check, claims each entry (its name, then "slot|mode|ttl|task|fingerprint")
# whose slot is later than its fence, or which this token already claimed (a retry after a lost
# reply), taking the run lease of a guarded one as its mode says (store/base.py RunGuard) and
# counting each new claim in the run counts (KEYS[5]). Returns 0 if the lease is not the caller's,
# else flat (entry, answer) pairs for the entries not simply claimed: "!" left unclaimed, the
# holder's task if another task held the run lease, "-" and the holder for a guarded entry left
# unclaimed for that reason (few answers, so a large claim costs little to read).
CLAIM_SCRIPT = (
    PARSE_FENCE
    + RECORD_HISTORY
    + """
local start = 4 + tonumber(ARGV[3])
record(KEYS[4], tonumber(ARGV[2]), 4, start - 1)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local result = {}
for i = start, #ARGV, 2 do
  local entry = ARGV[i]
  local wanted_text, mode, ttl, task, fingerprint =
    string.match(ARGV[i + 1], '^(%d+)|([^|]*)|(%d*)|([^|]*)|(.*)$')
  local slot, token = parse(redis.call('HGET', KEYS[2], entry))
  local wanted = tonumber(wanted_text)
  local mine = slot and tonumber(slot) == wanted and token == ARGV[1]
  if mine or not slot or wanted > tonumber(slot) then
    local holder = ''
    if mode ~= '' then
      holder = redis.call('GET', KEYS[3] .. entry) or ''
      if holder == task then holder = '' end
      if holder == '' or mode == 'replace' then
        redis.call('SET', KEYS[3] .. entry, task, 'PX', ttl)
      end
    end
    if mode == 'buffer_one' and holder ~= '' then
      result[#result + 1] = entry
      result[#result + 1] = '-' .. holder
    else
      if not mine then
        local previous = ''
        if slot then previous = (token == '' and 'a' or '') .. slot end
        redis.call('HSET', KEYS[2], entry, wanted_text .. '|' .. ARGV[1] .. '|' .. previous
          .. '|' .. fingerprint)
        redis.call('HINCRBY', KEYS[5], entry, 1)
      end
      if holder ~= '' then
        result[#result + 1] = entry
        result[#result + 1] = holder
      end
    end
  else
    result[#result + 1] = entry
    result[#result + 1] = '!'
  end
end
return result
"""
)

# Under one lease check, restores the previous fence of each (entry, slot) still claimed by the
# caller, so a give-back never undoes anyone else's claim, and drops the run lease the slot's task
# still holds (task "" for none); returns the entries given back.
UNCLAIM_SCRIPT = (
    PARSE_FENCE
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {}
end
local given = {}
for i = 2, #ARGV, 3 do
  local slot, token, previous, fingerprint = parse(redis.call('HGET', KEYS[2], ARGV[i]))
  if ARGV[i + 2] ~= '' and redis.call('GET', KEYS[3] .. ARGV[i]) == ARGV[i + 2] then
    redis.call('DEL', KEYS[3] .. ARGV[i])
  end
  if slot and token == ARGV[1] and tonumber(slot) == tonumber(ARGV[i + 1]) then
    local runs = tonumber(redis.call('HGET', KEYS[4], ARGV[i]) or '0') or 0
    if runs > 1 then
      redis.call('HSET', KEYS[4], ARGV[i], runs - 1)
    else
      redis.call('HDEL', KEYS[4], ARGV[i])
    end
    if previous == '' then
      redis.call('HDEL', KEYS[2], ARGV[i])
    elseif string.sub(previous, 1, 1) == 'a' then
      redis.call('HSET', KEYS[2], ARGV[i], string.sub(previous, 2) .. '|||' .. fingerprint)
    else
      redis.call('HSET', KEYS[2], ARGV[i], previous .. '|-||' .. fingerprint)
    end
    given[#given + 1] = ARGV[i]
  end
end
return given
"""
)

# Under one lease check, anchors each entry that has no readable fence or a fence of another
# schedule; returns every given entry's fence value after the call, as flat (entry, value) pairs.
ANCHOR_SCRIPT = (
    PARSE_FENCE
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {}
end
local fences = {}
for i = 2, #ARGV, 3 do
  local value = redis.call('HGET', KEYS[2], ARGV[i])
  local slot, _, _, fingerprint = parse(value)
  if not slot or (fingerprint ~= '' and fingerprint ~= ARGV[i + 2]) then
    value = ARGV[i + 1] .. '|||' .. ARGV[i + 2]
    redis.call('HSET', KEYS[2], ARGV[i], value)
  end
  fences[#fences + 1] = ARGV[i]
  fences[#fences + 1] = value
end
return fences
"""
)

# Drops fences only while the caller's token holds the lease, so a deposed leader cannot delete
# the fences a live leader relies on.
FORGET_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
for i = 2, #ARGV do
  redis.call('HDEL', KEYS[2], ARGV[i])
  redis.call('HDEL', KEYS[3], ARGV[i])
end
return 1
"""

# Records one beat (role|last seen|expires|d<schedule digest>) and prunes the expired ones by the
# server's clock, so that beats on hosts whose clocks disagree still agree on who is alive; the
# hash itself expires once every beat has gone.
HEARTBEAT_SCRIPT = """
if redis.replicate_commands then redis.replicate_commands() end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1],
  string.format('%s|%d|%d|d%s', ARGV[2], now, now + ttl, ARGV[4]))
local beats = redis.call('HGETALL', KEYS[1])
for i = 1, #beats, 2 do
  local expires = tonumber(string.match(beats[i + 1], '|(%d+)|d[^|]*$')
    or string.match(beats[i + 1], '|(%d+)$'))
  if not expires or expires <= now then
    redis.call('HDEL', KEYS[1], beats[i])
  end
end
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
"""

# Takes an entry's run lease for a task when it is free or already that task's.
HOLD_RUN_SCRIPT = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# Extends each run lease still held by the given task; returns the entries renewed.
RENEW_RUNS_SCRIPT = """
local renewed = {}
for i = 2, #ARGV, 2 do
  if redis.call('GET', KEYS[1] .. ARGV[i]) == ARGV[i + 1] then
    redis.call('PEXPIRE', KEYS[1] .. ARGV[i], ARGV[1])
    renewed[#renewed + 1] = ARGV[i]
  end
end
return renewed
"""

# Drops a run lease only while the given task holds it, so a late release spares the next run.
RELEASE_RUN_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# Writes a shared document (the roster, the balance) only while the caller's token holds the lease.
SHARE_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""

#: A heartbeat's value; the digest (any text without "|") is marked with "d" so that no role,
#: however spelled, is misread.
BEAT_VALUE = re.compile(r"^(?P<role>.*)\|(?P<seen>\d+)\|(?P<expires>\d+)(?:\|d(?P<digest>[^|]*))?$")

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


class RedisStore(RedisControls, Store):
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
        for entry, (slot, fingerprint) in slots.items():
            guard = runs.get(entry)
            if guard is None:
                args += (entry, f"{int(slot)}||||{fingerprint}")
            else:
                check_guard(guard)
                args += (
                    entry,
                    f"{int(slot)}|{guard.mode}|{guard.ttl_ms}|{guard.task_id}|{fingerprint}",
                )
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


def _flat(history: History) -> list[str]:
    """(entry, record) pairs as the scripts read them: entry, record, entry, record..."""
    return [text for pair in history for text in pair]


def _glob(text: str) -> str:
    """``text`` with the glob characters of Redis' MATCH escaped (a prefix may hold any)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


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
