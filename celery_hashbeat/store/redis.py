"""The HA store: Redis (plain, TLS or Sentinel), every multi-step change one Lua script.

All keys share the hash tag ``{<prefix>}`` so that one Redis Cluster slot holds them and a script
may touch them together:

- ``{p}:leader``: the leader's token, with the lease TTL as the key's expiry;
- ``{p}:fired``: a hash, entry name -> its fence (``slot|token|previous|fingerprint``, see
  store/base.py);
- ``{p}:runs``: a hash, entry name -> its run count, changed by the scripts that change fences;
- ``{p}:beats``: a hash, beat token -> ``role|last_seen_ms|expires_ms|d<schedule digest>`` in the
  server's clock;
- ``{p}:running:<entry>``: the entry's run lease, the task id, with the run TTL as its expiry;
- ``{p}:roster``: ``<resolved ms>|<JSON list of worker nodes>``;
- ``{p}:balance``: the leader's balanced assignment, JSON (DESIGN.md §16);
- ``{p}:history:<entry>``: a list, the entry's newest outcomes first, trimmed to HISTORY_CAP.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import redis
from redis.backoff import NoBackoff
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
# then, under one lease check, claims each (entry, slot) whose slot is later than its fence, or
# which this token already claimed (a retry after a lost reply), taking the run lease of a guarded
# one as its mode says (store/base.py RunGuard) and counting each new claim in the run counts
# (KEYS[5]); returns flat (entry, holder) pairs, holder "" unless another task held the run
# lease, and "-" for a guarded entry left unclaimed for that reason.
CLAIM_SCRIPT = (
    PARSE_FENCE
    + RECORD_HISTORY
    + """
local start = 4 + tonumber(ARGV[3])
record(KEYS[4], tonumber(ARGV[2]), 4, start - 1)
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {}
end
local result = {}
for i = start, #ARGV, 6 do
  local entry, mode, task = ARGV[i], ARGV[i + 3], ARGV[i + 4]
  local slot, token = parse(redis.call('HGET', KEYS[2], entry))
  local wanted = tonumber(ARGV[i + 1])
  local mine = slot and tonumber(slot) == wanted and token == ARGV[1]
  if mine or not slot or wanted > tonumber(slot) then
    local holder = ''
    if mode ~= '' then
      holder = redis.call('GET', KEYS[3] .. entry) or ''
      if holder == task then holder = '' end
      if holder == '' or mode == 'replace' then
        redis.call('SET', KEYS[3] .. entry, task, 'PX', ARGV[i + 5])
      end
    end
    if mode == 'buffer_one' and holder ~= '' then
      result[#result + 1] = entry
      result[#result + 1] = '-' .. holder
    else
      if not mine then
        local previous = ''
        if slot then previous = (token == '' and 'a' or '') .. slot end
        redis.call('HSET', KEYS[2], entry, ARGV[i + 1] .. '|' .. ARGV[1] .. '|' .. previous
          .. '|' .. ARGV[i + 2])
        redis.call('HINCRBY', KEYS[5], entry, 1)
      end
      result[#result + 1] = entry
      result[#result + 1] = holder
    end
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

SCHEMES = {"redis": 6379, "rediss": 6379, "redis+sentinel": 26379, "rediss+sentinel": 26379}
TLS_OPTIONS = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_check_hostname")
OPTIONS = (
    "socket_timeout",
    "socket_connect_timeout",
    "master_name",
    "sentinel_kwargs",
    *TLS_OPTIONS,
)
CERT_REQS = {
    "required": ssl.CERT_REQUIRED,
    "optional": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
    "cert_required": ssl.CERT_REQUIRED,
    "cert_optional": ssl.CERT_OPTIONAL,
    "cert_none": ssl.CERT_NONE,
}
# Server replies that mean "not now" rather than "never": retrying later can succeed.
TRANSIENT_REPLIES = ("BUSY", "LOADING", "MASTERDOWN", "READONLY", "OOM", "MISCONF", "TRYAGAIN")


class RedisStore(Store):
    """The coordination protocol on Redis.

    Options, in the URL's query or as keywords (keywords win): ``socket_timeout`` and
    ``socket_connect_timeout`` (seconds, default 3), ``ssl_cert_reqs`` (``required`` by default,
    ``optional``, ``none``, or Celery's ``CERT_*`` spelling), ``ssl_ca_certs``, ``ssl_certfile``,
    ``ssl_keyfile``, ``ssl_check_hostname`` (``rediss://`` only), ``master_name`` and
    ``sentinel_kwargs`` (Sentinel only; the latter a dict of connection options for the
    sentinels themselves). ``transport_options``, Celery's dict of broker options, supplies any of
    these it holds and its other keys are ignored.

    Commands are never retried behind the caller's back: a claim that timed out may have run, and
    running it again would report its own slots as taken.
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
        self._sentinel, self._client, self._secret = _connect(url, options)
        self._renew = self._client.register_script(RENEW_SCRIPT)
        self._release = self._client.register_script(RELEASE_SCRIPT)
        self._claim = self._client.register_script(CLAIM_SCRIPT)
        self._unclaim = self._client.register_script(UNCLAIM_SCRIPT)
        self._anchor = self._client.register_script(ANCHOR_SCRIPT)
        self._forget = self._client.register_script(FORGET_SCRIPT)
        self._heartbeat = self._client.register_script(HEARTBEAT_SCRIPT)
        self._hold_run = self._client.register_script(HOLD_RUN_SCRIPT)
        self._renew_runs = self._client.register_script(RENEW_RUNS_SCRIPT)
        self._release_run = self._client.register_script(RELEASE_RUN_SCRIPT)
        self._share = self._client.register_script(SHARE_SCRIPT)
        self._record = self._client.register_script(RECORD_SCRIPT)

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
            return bool(self._renew(keys=[self._leader, self._history], args=args))

    def release(self, token: str) -> bool:
        with self._talking():
            return bool(self._release(keys=[self._leader, self._beats], args=[token]))

    def leader(self) -> LeaseInfo | None:
        with self._talking():
            pipe = self._client.pipeline(transaction=True)
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
                args += (entry, int(slot), fingerprint, "", "", 0)
            else:
                check_guard(guard)
                args += (entry, int(slot), fingerprint, guard.mode, guard.task_id, guard.ttl_ms)
        with self._talking():
            keys = [self._leader, self._fired, self._running, self._history, self._runs]
            flat = self._claim(keys=keys, args=args)
        pairs = list(zip(flat[::2], flat[1::2], strict=True))
        return Claimed(
            (entry for entry, holder in pairs if not holder.startswith("-")),
            {entry: holder.removeprefix("-") for entry, holder in pairs if holder},
        )

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
            return set(self._unclaim(keys=keys, args=args))

    def anchor(self, token: str, anchors: Mapping[str, tuple[int, str]]) -> dict[str, Fence]:
        if not anchors:
            return {}
        args: list[str | int] = [token]
        for entry, (instant, fingerprint) in anchors.items():
            args += (entry, int(instant), fingerprint)
        with self._talking():
            flat = self._anchor(keys=[self._leader, self._fired], args=args)
        pairs = iter(flat)
        return self._parse_fences(zip(pairs, pairs, strict=True))

    def fences(self, entries: Iterable[str] | None = None) -> dict[str, Fence]:
        with self._talking():
            if entries is None:
                pipe = self._client.pipeline()
                stored: dict[str, str]
                stored, counted = pipe.hgetall(self._fired).hgetall(self._runs).execute()
            else:
                names = list(entries)
                if not names:
                    return {}
                pipe = self._client.pipeline()
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
            return bool(self._forget(keys=keys, args=[token, *names]))

    def hold_run(self, entry: str, task_id: str, ttl_ms: int) -> bool:
        check_ttl(ttl_ms)
        with self._talking():
            return bool(self._hold_run(keys=[self._running + entry], args=[task_id, ttl_ms]))

    def renew_runs(self, runs: Mapping[str, str], ttl_ms: int) -> set[str]:
        check_ttl(ttl_ms)
        if not runs:
            return set()
        args: list[str | int] = [ttl_ms]
        for entry, task_id in runs.items():
            args += (entry, task_id)
        with self._talking():
            return set(self._renew_runs(keys=[self._running], args=args))

    def release_run(self, entry: str, task_id: str) -> bool:
        with self._talking():
            return bool(self._release_run(keys=[self._running + entry], args=[task_id]))

    def running(self, entries: Iterable[str] | None = None) -> dict[str, str]:
        with self._talking():
            if entries is None:
                keys = list(self._client.scan_iter(match=_glob(self._running) + "*", count=1000))
                names = [key[len(self._running) :] for key in keys]
            else:
                names = list(entries)
                keys = [self._running + name for name in names]
            values = self._client.mget(keys) if keys else []
        return {name: value for name, value in zip(names, values, strict=True) if value is not None}

    def shared(self, name: str) -> str | None:
        with self._talking():
            value: str | None = self._client.get(self._shared + name)
        return value

    def share(self, token: str, name: str, value: str) -> bool:
        with self._talking():
            return bool(self._share(keys=[self._leader, self._shared + name], args=[token, value]))

    def record(self, history: History) -> None:
        if not history:
            return
        with self._talking():
            self._record(keys=[self._history], args=[HISTORY_CAP, *_flat(history)])

    def history(self, entry: str, limit: int = HISTORY_CAP) -> list[str]:
        if limit <= 0:
            return []
        with self._talking():
            return list(self._client.lrange(self._history + entry, 0, limit - 1))

    def heartbeat(self, token: str, role: str, ttl_ms: int, schedule_digest: str = "") -> None:
        check_ttl(ttl_ms)
        check_digest(schedule_digest)
        with self._talking():
            self._heartbeat(keys=[self._beats], args=[token, role, ttl_ms, schedule_digest])

    def beats(self) -> list[BeatInfo]:
        with self._talking():
            pipe = self._client.pipeline(transaction=True)
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
            self._client.ping()

    def close(self) -> None:
        self._client.close()
        self._client.connection_pool.disconnect()
        for sentinel in self._sentinel.sentinels if self._sentinel else ():
            sentinel.close()

    @contextmanager
    def _talking(self) -> Iterator[None]:
        """Turn redis-py's errors into the protocol's, worded for whoever reads the log."""
        try:
            yield
        except redis.RedisError as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: redis.RedisError) -> StoreError:
        text = str(exc) or type(exc).__name__
        if self._secret:
            text = text.replace(self._secret, "***")
        auth_errors = (
            redis.AuthenticationError,
            redis.AuthenticationWrongNumberOfArgsError,
            redis.exceptions.NoPermissionError,
        )
        if isinstance(exc, auth_errors) or text.startswith(("WRONGPASS", "NOAUTH", "NOPERM")):
            return StoreAuthError(
                f"Redis store {self.url} refused the credentials ({text}): set the right user and "
                "password in hashbeat_store_url (redis://user:password@host:port/db)"
            )
        transient = (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ReadOnlyError)
        if isinstance(exc, transient) or text.startswith(TRANSIENT_REPLIES):
            return StoreUnavailable(f"Redis store {self.url} is not answering ({text}); will retry")
        return StoreError(f"Redis store {self.url} failed: {type(exc).__name__}: {text}")


def _connect(
    url: str, given: Mapping[str, object]
) -> tuple[Sentinel | None, redis.Redis[str], str | None]:
    """Check everything about the URL and options up front; connect lazily, on first use.

    Returns the Sentinel (if any), the client, and the password, to keep it out of messages.
    """
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
    tls = parts.scheme.startswith("rediss")

    userinfo, _, netloc = parts.netloc.rpartition("@")
    username, _, password = (unquote(part) for part in userinfo.partition(":"))
    hosts = [_host_port(url, host, SCHEMES[parts.scheme]) for host in netloc.split(",")]
    if len(hosts) > 1 and not sentinel:
        raise config_error(url, "it names several hosts", "use redis+sentinel:// for Sentinel")
    db = parts.path.strip("/") or "0"
    if not db.isdigit():
        raise config_error(url, f"the database {db!r} is not a number", "write /0, /1, ...")

    timeout = opts.seconds("socket_timeout", DEFAULT_TIMEOUT_S)
    sockets: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": opts.seconds("socket_connect_timeout", timeout),
        "retry": Retry(NoBackoff(), 0),
    }
    kwargs: dict[str, Any] = {
        **sockets,
        "db": int(db),
        "username": username or None,
        "password": password or None,
        "decode_responses": True,
        **_tls(opts, tls),
    }
    master = opts.text("master_name")
    if not sentinel:
        if opts.given("master_name") or opts.given("sentinel_kwargs"):
            raise config_error(url, "master_name is for Sentinel", "use redis+sentinel://")
        return None, redis.Redis(host=hosts[0][0], port=hosts[0][1], **kwargs), password or None
    if master is None:
        raise config_error(url, "Sentinel needs a master name", "add ?master_name=mymaster")
    sentinels = Sentinel(hosts, sentinel_kwargs={**sockets, **opts.mapping("sentinel_kwargs")})
    return sentinels, sentinels.master_for(master, **kwargs), password or None


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
