"""The Lua scripts of the Redis store (store/redis.py), one named constant each.

Every change that takes more than one step (check the lease, then write) is one script, so that
Redis runs it whole and no other client sees it half done; the comment above each says what it
guarantees. They are text only: RedisStore registers and runs them.
"""

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
# then, under one lease check, claims each entry of the last argument (records of
# "<bytes>:<entry bytes>:<entry>slot|mode|ttl|task|fingerprint", so that a large claim is one
# argument to send and any name or fingerprint reads back whole)
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
local packed = ARGV[start]
local at = 1
while at <= #packed do
  local colon = string.find(packed, ':', at, true)
  local stop = colon + tonumber(string.sub(packed, at, colon - 1))
  local named = string.find(packed, ':', colon + 1, true)
  local name_end = named + tonumber(string.sub(packed, colon + 1, named - 1))
  local entry = string.sub(packed, named + 1, name_end)
  local wanted_text, mode, ttl, task, fingerprint = string.match(
    string.sub(packed, name_end + 1, stop), '^(%d+)|([^|]*)|(%d*)|([^|]*)|(.*)$')
  at = stop + 1
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
