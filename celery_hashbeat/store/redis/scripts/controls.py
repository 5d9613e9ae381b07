"""The Lua scripts of the runtime controls (store/controls.py): definitions, pauses, triggers."""

# Sets or deletes one name's stored definition and pause record (store/controls.py), and drops
# the marks of names removed GONE_TTL_MS or more ago (store/retention.py).
# KEYS[1]     the version, {p}:version
# KEYS[2]     the changes, {p}:changes (name -> the version of its last change)
# KEYS[3]     the definitions, {p}:defs
# KEYS[4]     the pause records, {p}:paused
# KEYS[5]     the removed names, {p}:removed (name -> when its last record went, server ms)
# KEYS[6]     the floor of the changes, {p}:changes-floor (a hash: "version" -> the newest
#             version of a dropped mark)
# ARGV[1]     the name
# ARGV[2]     what must hold first: "present" (a definition is stored), "absent" (none is), or
#             "" (nothing)
# ARGV[3]     what to do to the definition: "set", "del" or "keep"
# ARGV[4]     the definition to set (JSON), else ""
# ARGV[5]     what to do to the pause record: "set", "del" or "keep"
# ARGV[6]     the pause record to set (JSON), else ""
# ARGV[7]     how long a removed name's mark is kept, in milliseconds (GONE_TTL_MS)
# Returns     the new version, or -1 when what must hold did not (and nothing changed)
# Guarantee   the check, the writes, the new version and the name's mark are one step, so a
#             reader sees all of an edit or none of it, and an edit that requires a state never
#             lands on another; not lease-checked, since operators edit whether or not a beat
#             runs. A mark is dropped only with the floor raised past it, so a reader from an
#             older version reads everything (READ_CHANGES) and misses no removal.
EDIT_CONTROLS_SCRIPT = """
if redis.replicate_commands then redis.replicate_commands() end
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
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local present = redis.call('HEXISTS', KEYS[3], ARGV[1]) + redis.call('HEXISTS', KEYS[4], ARGV[1])
if present == 0 then
  redis.call('ZADD', KEYS[5], now, ARGV[1])
else
  redis.call('ZREM', KEYS[5], ARGV[1])
end
local old = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[7]))
if #old > 0 then
  local floor = tonumber(redis.call('HGET', KEYS[6], 'version') or '0')
  for _, name in ipairs(old) do
    floor = math.max(floor, tonumber(redis.call('ZSCORE', KEYS[2], name) or '0'))
    redis.call('ZREM', KEYS[2], name)
    redis.call('ZREM', KEYS[5], name)
  end
  redis.call('HSET', KEYS[6], 'version', floor)
end
return version
"""


# Replaces one stored definition if it is still the one the caller read (compare-and-set).
# KEYS[1]     the version, {p}:version
# KEYS[2]     the changes, {p}:changes
# KEYS[3]     the definitions, {p}:defs
# ARGV[1]     the name
# ARGV[2]     the definition the caller read (JSON)
# ARGV[3]     the definition to store instead (JSON)
# Returns     the new version, or -1 when the stored definition is another or gone (nothing
#             changed)
# Guarantee   the comparison, the write, the new version and the name's mark are one step, so of
#             two updates that read the same definition one lands and the other is told; not
#             lease-checked, since operators edit whether or not a beat runs.
SWAP_DEFINITION_SCRIPT = """
if redis.call('HGET', KEYS[3], ARGV[1]) ~= ARGV[2] then
  return -1
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3])
local version = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], version, ARGV[1])
return version
"""


# Reads what changed since a version.
# KEYS[1]     the version, {p}:version
# KEYS[2]     the changes, {p}:changes
# KEYS[3]     the definitions, {p}:defs
# KEYS[4]     the pause records, {p}:paused
# KEYS[5]     the triggers waiting, {p}:triggers
# KEYS[6]     the floor of the changes, {p}:changes-floor
# KEYS[7]     the slots handed over, {p}:handed
# KEYS[8]     the triggers taken and not settled, {p}:triggers-taken
# ARGV[1]     the version the caller last saw (0 for none)
# Returns     {version, 1 if every name is listed else 0, the number of triggers waiting (queued,
#             or taken and not settled), the number of slots handed over}, then
#             (name, definition or "", pause record or "") for each name changed after ARGV[1];
#             no names for a caller already at the version
# Guarantee   one consistent read: the records are those of the version returned, so a reader
#             that asks again from that version misses no change; a reader from before the floor
#             (a removal's mark it never saw was dropped) gets every name.
READ_CHANGES_SCRIPT = """
local version = tonumber(redis.call('GET', KEYS[1]) or '0')
local since = tonumber(ARGV[1])
local waiting = redis.call('LLEN', KEYS[5]) + redis.call('LLEN', KEYS[8])
local out = {version, 0, waiting, redis.call('SCARD', KEYS[7])}
if since == version then return out end
local low = '(' .. since
local floor = tonumber(redis.call('HGET', KEYS[6], 'version') or '0')
if since == 0 or since > version or since < floor then
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


# Queues a trigger (one run now, asked by an operator).
# KEYS[1]     the version, {p}:version
# KEYS[2]     the triggers waiting, {p}:triggers
# ARGV[1]     the trigger (JSON)
# Returns     the new version
# Guarantee   the trigger is queued and the version raised together, so the polling leader that
#             sees the new version finds the trigger.
ASK_TRIGGER_SCRIPT = """
redis.call('RPUSH', KEYS[2], ARGV[1])
return redis.call('INCR', KEYS[1])
"""


# Takes every waiting trigger (and backfill request) off the queue, keeping them as taken.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the triggers waiting, {p}:triggers
# KEYS[3]     the triggers taken and not settled, {p}:triggers-taken
# KEYS[4]     who took them, {p}:triggers-taken-by
# ARGV[1]     the caller's token
# Returns     {how many of the triggers were recovered, the triggers...}: first those an earlier
#             take left unsettled, whoever took them, then the queue's, oldest first ({} without
#             the lease)
# Guarantee   only the lease holder takes triggers; the queue empties into the taken list in the
#             same step, now the caller's, so nothing taken is lost with a leader that dies
#             before it settles: the next take (by whoever holds the lease) hands it back.
TAKE_TRIGGERS_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {} end
local recovered = redis.call('LRANGE', KEYS[3], 0, -1)
local waiting = redis.call('LRANGE', KEYS[2], 0, -1)
redis.call('DEL', KEYS[2])
local taken = {#recovered}
for _, item in ipairs(recovered) do taken[#taken + 1] = item end
for _, item in ipairs(waiting) do
  taken[#taken + 1] = item
  redis.call('RPUSH', KEYS[3], item)
end
if #taken > 1 then
  redis.call('SET', KEYS[4], ARGV[1])
end
return taken
"""


# Settles the caller's take: puts back what is to be taken again, and clears what it took.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the triggers waiting, {p}:triggers
# KEYS[3]     the version, {p}:version
# KEYS[4]     the triggers taken and not settled, {p}:triggers-taken
# KEYS[5]     who took them, {p}:triggers-taken-by
# ARGV[1]     the caller's token
# ARGV[2..]   the triggers to put back, oldest first (none is fine)
# Returns     1 if the turn was settled, 0 if the caller does not hold the lease
# Guarantee   only the lease holder settles; the triggers return to the head of the queue in
#             their order and the taken list goes in the same step, so an item is either taken
#             or queued, never neither; the taken list is cleared only if the caller took it
#             last (else a later leader's take holds it, and the next take recovers it); the
#             version rises when something went back, so that it is seen again.
GIVE_BACK_TRIGGERS_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('GET', KEYS[5]) == ARGV[1] then
  redis.call('DEL', KEYS[4], KEYS[5])
end
for i = #ARGV, 2, -1 do
  redis.call('LPUSH', KEYS[2], ARGV[i])
end
if #ARGV > 1 then
  redis.call('INCR', KEYS[3])
end
return 1
"""
