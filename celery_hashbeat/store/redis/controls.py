"""The runtime controls (store/controls.py) on Redis, each change one Lua script.

Keys, under the store's hash tag like every other:

- ``{p}:defs`` and ``{p}:paused``: hashes, name -> its definition, and name -> its pause record;
- ``{p}:version``: the version, raised by every write;
- ``{p}:changes``: a sorted set, name -> the version of its last change (names stay in it after
  their records go, so that a beat still learns of the removal);
- ``{p}:triggers``: a list, the triggers waiting, oldest first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import redis
from redis.commands.core import Script

from celery_hashbeat.store.controls import DEFINITION, PAUSE, Changes, ControlRecords, check_values

# Under one step: checks that a definition is (or is not) stored when asked to, sets or deletes
# the definition and the pause record, raises the version and marks the name with it; returns
# the new version, or -1 when the requirement failed (and nothing changed).
EDIT_SCRIPT = """
local stored = redis.call('HEXISTS', KEYS[3], ARGV[1]) == 1
if (ARGV[2] == 'present' and not stored) or (ARGV[2] == 'absent' and stored) then
  return -1
end
for i, key in ipairs({KEYS[3], KEYS[4]}) do
  local op, value = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  if op == 'set' then
    redis.call('HSET', key, ARGV[1], value)
  elseif op == 'del' then
    redis.call('HDEL', key, ARGV[1])
  end
end
local version = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], version, ARGV[1])
return version
"""

# Reads, in one consistent step, the version, whether the read is full, the triggers waiting,
# then (name, definition or '', pause or '') for every name changed after ARGV[1]; a caller
# already at the version gets no names.
CHANGES_SCRIPT = """
local version = tonumber(redis.call('GET', KEYS[1]) or '0')
local since = tonumber(ARGV[1])
local out = {version, 0, redis.call('LLEN', KEYS[5])}
if since == version then return out end
local low = '(' .. since
if since == 0 or since > version then
  out[2] = 1
  low = '-inf'
end
for _, name in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], low, '+inf')) do
  out[#out + 1] = name
  out[#out + 1] = redis.call('HGET', KEYS[3], name) or ''
  out[#out + 1] = redis.call('HGET', KEYS[4], name) or ''
end
return out
"""

# Queues a trigger and raises the version, so that the polling leader sees it.
ASK_SCRIPT = """
redis.call('RPUSH', KEYS[2], ARGV[1])
return redis.call('INCR', KEYS[1])
"""

# Takes every waiting trigger, only while the caller's token holds the lease.
TAKE_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {} end
local taken = redis.call('LRANGE', KEYS[2], 0, -1)
redis.call('DEL', KEYS[2])
return taken
"""

# Puts triggers back at the head of the queue in their order, only while the caller's token holds
# the lease, and raises the version so that they are seen again.
GIVE_BACK_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
for i = #ARGV, 2, -1 do
  redis.call('LPUSH', KEYS[2], ARGV[i])
end
redis.call('INCR', KEYS[3])
return 1
"""


class RedisControlRecords(ControlRecords):
    """The controls half of RedisStore, which supplies the client, the lease key and the error
    translation."""

    _leader: str
    _run: Callable[[Script, list[str], list[str | int]], Any]
    _talking: Callable[[], AbstractContextManager[None]]
    _client: Any

    def _init_controls(self, prefix: str) -> None:
        tag = f"{{{prefix}}}:"
        self._defs, self._paused = tag + "defs", tag + "paused"
        self._version, self._changes = tag + "version", tag + "changes"
        self._triggers = tag + "triggers"
        encoder: redis.Redis[str] = redis.Redis(decode_responses=True)
        self._edit = Script(encoder, EDIT_SCRIPT)
        self._read_changes = Script(encoder, CHANGES_SCRIPT)
        self._ask = Script(encoder, ASK_SCRIPT)
        self._take = Script(encoder, TAKE_SCRIPT)
        self._give_back = Script(encoder, GIVE_BACK_SCRIPT)

    def edit(
        self, name: str, values: Mapping[str, str | None], require: bool | None = None
    ) -> int | None:
        check_values(values)
        args: list[str | int] = [name, {None: "", True: "present", False: "absent"}[require]]
        for kind in (DEFINITION, PAUSE):
            if kind not in values:
                args += ["keep", ""]
            else:
                value = values[kind]
                args += ["del", ""] if value is None else ["set", value]
        keys = [self._version, self._changes, self._defs, self._paused]
        with self._talking():
            version = int(self._run(self._edit, keys, args))
        return None if version < 0 else version

    def changes(self, since: int) -> Changes:
        keys = [self._version, self._changes, self._defs, self._paused, self._triggers]
        with self._talking():
            reply = self._run(self._read_changes, keys, [since])
        version, full, waiting = (int(value) for value in reply[:3])
        records = {
            name: (definition or None, pause or None)
            for name, definition, pause in _triples(reply[3:])
        }
        return Changes(version, records, bool(full), waiting)

    def controls_of(self, name: str) -> tuple[str | None, str | None]:
        with self._talking():
            pipe = self._client.pipeline(transaction=False)
            definition, pause = pipe.hget(self._defs, name).hget(self._paused, name).execute()
        return definition, pause

    def ask(self, trigger: str) -> int:
        with self._talking():
            return int(self._run(self._ask, [self._version, self._triggers], [trigger]))

    def triggers(self) -> list[str]:
        with self._talking():
            return list(self._client.lrange(self._triggers, 0, -1))

    def take_triggers(self, token: str) -> list[str]:
        with self._talking():
            return list(self._run(self._take, [self._leader, self._triggers], [token]))

    def give_back_triggers(self, token: str, triggers: Sequence[str]) -> bool:
        if not triggers:
            return True
        keys = [self._leader, self._triggers, self._version]
        with self._talking():
            return bool(self._run(self._give_back, keys, [token, *triggers]))


def _triples(flat: list[str]) -> Iterator[tuple[str, str, str]]:
    for i in range(0, len(flat) - 2, 3):
        yield flat[i], flat[i + 1], flat[i + 2]
