"""Every Lua script of the Redis store, one named constant each, each with its header.

Every change that takes more than one step (check the lease, then write) is one script, so that
Redis runs it whole and no other client sees it half done. Above each script, its header says:

- KEYS: each key it is given (store/redis/keys.py spells them; a key "prefix" is one the script
  completes with an entry's name, which keeps it in the prefix's cluster slot);
- ARGV: each argument, with its unit;
- Returns: the reply's shape and meaning;
- Guarantee: what holds however many beats, workers and operators run it at once.

Times are milliseconds. ``{p}`` is the hash tag of the store's prefix. The two helpers at the top
are Lua functions that scripts put before their own text. The scripts are text only: the store
registers them (Connection.script) and Redis runs them by their SHA.
"""

from celery_hashbeat.store.retention import GONE_TTL_MS, HISTORY_TTL_MS

# Helper, put before the scripts that carry history: record(prefix, cap, first, last) appends the
# (entry, record) pairs ARGV[first..last] to the lists prefix .. entry, each trimmed to its newest
# cap records and living HISTORY_TTL_MS after its last record (store/retention.py), except a
# history whose entry was forgotten (GONE_TTL_MS or less left): a late record does not revive it.
RECORD_HISTORY = f"""
local function record(prefix, cap, first, last)
  for i = first, last, 2 do
    local key = prefix .. ARGV[i]
    local left = redis.call('PTTL', key)
    redis.call('LPUSH', key, ARGV[i + 1])
    redis.call('LTRIM', key, 0, cap - 1)
    if left < 0 or left > {GONE_TTL_MS} then
      redis.call('PEXPIRE', key, {HISTORY_TTL_MS})
    end
  end
end
"""

# Records history and nothing else.
# KEYS[1]     the history prefix, {p}:history:
# ARGV[1]     the most records kept per entry (HISTORY_CAP)
# ARGV[2..]   (entry, record) pairs, oldest first
# Returns     1
# Guarantee   each entry's history gains the records given and never holds more than the cap;
#             not lease-checked, since a history says what happened, whoever saw it happen.
RECORD_SCRIPT = (
    RECORD_HISTORY
    + """
record(KEYS[1], tonumber(ARGV[1]), 2, #ARGV)
return 1
"""
)

# Records the history it carries, then extends the lease.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the history prefix, {p}:history:
# ARGV[1]     the caller's token
# ARGV[2]     the lease's new time to live, in milliseconds
# ARGV[3]     the most records kept per entry (HISTORY_CAP)
# ARGV[4..]   (entry, record) pairs, oldest first
# Returns     1 if the lease was extended, 0 if the caller does not hold it (step down at once)
# Guarantee   the lease is extended only while the caller's token holds it, so a deposed leader
#             cannot revive it; the history is recorded whatever the answer.
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

# Gives the lease up, so a standby takes over at once.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the heartbeats, {p}:beats
# ARGV[1]     the caller's token
# Returns     1 if the lease was deleted, 0 if the caller did not hold it
# Guarantee   the lease and the caller's heartbeat go only while the caller's token holds the
#             lease, so a late release spares a successor, and a stopped beat is not listed as
#             leader.
RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# Helper, put before the scripts that read fences: parse(value) reads a fence as store/values.py's
# parse_stored does (slot, token, previous, fingerprint; a bare slot of release 0.1 is a claim by
# "-"), or gives nil for a value that does not parse, which the scripts treat as absent, so that
# no script ever fails on a stored value.
PARSE_FENCE = """
local function parse(value)
  if not value then return nil end
  if string.match(value, '^%d+$') then return value, '-', '', '' end
  local slot, token, previous, fingerprint = string.match(value, '^(%d+)|([^|]*)|([^|]*)|(.*)$')
  if previous and previous ~= '' and not string.match(previous, '^a?%d+$') then return nil end
  return slot, token, previous, fingerprint
end
"""

# Records the history it carries, then claims a tick's due slots under one lease check.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the fences, {p}:fired (entry -> slot|token|previous|fingerprint)
# KEYS[3]     the run-lease prefix, {p}:running:
# KEYS[4]     the history prefix, {p}:history:
# KEYS[5]     the run counts, {p}:runs (entry -> slots claimed and not given back)
# KEYS[6]     the claims moved past, {p}:claimed (sorted set, see keys.py)
# ARGV[1]     the caller's token
# ARGV[2]     the most records kept per entry (HISTORY_CAP)
# ARGV[3]     h, how many history arguments follow
# ARGV[4..]   h arguments: (entry, record) pairs, oldest first
# ARGV[4+h]   the claims, packed into one argument so that a large claim is cheap to send and any
#             name reads back whole: per entry "<n>:<m>:<entry><slot>|<mode>|<ttl>|<task>|<fp>",
#             n the bytes after the first colon, m the bytes of the entry's name, slot in epoch
#             milliseconds, mode the run guard (skip, buffer_one, replace; empty for none), ttl
#             the run lease's time to live in milliseconds, task the guarded run's task id, fp
#             the schedule's fingerprint
# KEYS[7]     the slots recorded as sent, {p}:sent (sorted set of "<slot>|<entry>" by slot)
# KEYS[8]     when recording sent slots began, {p}:sent-since (server ms)
# ARGV[5+h]   how long a claim moved past is kept, in milliseconds (HANDOVER_KEEP_MS)
# ARGV[6+h]   how long a sent slot is recorded, by slot time, in milliseconds (SENT_KEEP_MS)
# ARGV[7+h]   the most sent slots recorded (SENT_CAP)
# Returns     0 if the caller does not hold the lease; else flat (entry, answer) pairs for the
#             entries not simply claimed (few, so a large claim is cheap to read): "!" left
#             unclaimed (its fence is at or past the slot, or the slot is recorded as sent by a
#             backfill); "-<task>" a buffer_one entry left
#             unclaimed because <task> holds its run lease; "<task>" claimed, though <task> held
#             the run lease
# Guarantee   a claim is made only while the caller's token holds the lease, and only for a slot
#             later than the entry's fence, or for the very slot this token already claimed (a
#             retry after a lost reply, counted once); the claimer and what a give-back restores
#             are recorded in the fence, and each new claim adds one to the entry's run count;
#             a fence of another beat's claim that a claim moves past is kept in {p}:claimed,
#             so that its claimer can still hand the slot over (HAND_OVER_SCRIPT); each slot
#             claimed is recorded in {p}:sent, and a slot recorded there is never claimed again
#             (the ZADD NX that records it is the check), the record trimmed by age and count
#             at one command each; the history is recorded whatever the answer.
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
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', '(' .. (now - tonumber(ARGV[start + 1])))
redis.call('SET', KEYS[8], now, 'NX')
redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', '(' .. (now - tonumber(ARGV[start + 2])))
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
  local sent = wanted_text .. '|' .. entry
  if (mine or not slot or wanted > tonumber(slot))
      and (mine or redis.call('ZADD', KEYS[7], 'NX', wanted, sent) == 1) then
    local holder = ''
    if mode ~= '' then
      holder = redis.call('GET', KEYS[3] .. entry) or ''
      if holder == task then holder = '' end
      if holder == '' or mode == 'replace' then
        redis.call('SET', KEYS[3] .. entry, task, 'PX', ttl)
      end
    end
    if mode == 'buffer_one' and holder ~= '' then
      if not mine then redis.call('ZREM', KEYS[7], sent) end
      result[#result + 1] = entry
      result[#result + 1] = '-' .. holder
    else
      if not mine then
        local previous = ''
        if slot then previous = (token == '' and 'a' or '') .. slot end
        if slot and token ~= '' and token ~= '-' and token ~= ARGV[1] then
          redis.call('ZADD', KEYS[6], now, slot .. '|' .. token .. '|' .. entry)
        end
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
redis.call('ZREMRANGEBYRANK', KEYS[7], 0, -(tonumber(ARGV[start + 3]) + 1))
return result
"""
)

# Gives back claims whose publish failed.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the fences, {p}:fired
# KEYS[3]     the run-lease prefix, {p}:running:
# KEYS[4]     the run counts, {p}:runs
# KEYS[5]     the slots recorded as sent, {p}:sent
# ARGV[1]     the caller's token
# ARGV[2..]   (entry, slot in epoch milliseconds, task id or "" for none) triples
# Returns     the entries given back (none without the lease)
# Guarantee   under one lease check, a fence is restored to its previous value only while it is
#             still that slot claimed by the caller, so a give-back never undoes anyone else's
#             claim, and its run count loses the one the claim added and its record as sent
#             goes; a run lease goes only while the slot's task still holds it.
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
    redis.call('ZREM', KEYS[5], ARGV[i + 1] .. '|' .. ARGV[i])
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

# Hands over slots that the caller claimed and surely did not send, for whichever beat leads.
# KEYS[1]     the fences, {p}:fired
# KEYS[2]     the claims moved past, {p}:claimed
# KEYS[3]     the slots handed over, {p}:handed
# ARGV[1]     the caller's token
# ARGV[2..]   (entry, slot in epoch milliseconds) pairs
# Returns     flat (entry, slot) pairs of the slots handed over
# Guarantee   not lease-checked, since a beat that lost its lease still knows what it did not
#             send; a slot is handed over only if the store shows the caller claimed it (the
#             entry's fence, or a claim kept in {p}:claimed), and that proof is used up in the
#             same step (the fence's claimer becomes "-"), so each claim is handed over at most
#             once and nobody can hand over a slot another beat claimed.
HAND_OVER_SCRIPT = (
    PARSE_FENCE
    + """
local handed = {}
for i = 2, #ARGV, 2 do
  local entry, wanted = ARGV[i], ARGV[i + 1]
  local slot, token, previous, fingerprint = parse(redis.call('HGET', KEYS[1], entry))
  local proven = false
  if slot and token == ARGV[1] and tonumber(slot) == tonumber(wanted) then
    redis.call('HSET', KEYS[1], entry, slot .. '|-|' .. previous .. '|' .. fingerprint)
    proven = true
  elseif redis.call('ZREM', KEYS[2], wanted .. '|' .. ARGV[1] .. '|' .. entry) == 1 then
    proven = true
  end
  if proven then
    redis.call('SADD', KEYS[3], wanted .. '|' .. entry)
    handed[#handed + 1] = entry
    handed[#handed + 1] = wanted
  end
end
return handed
"""
)

# Takes every slot handed over, for the leader to send.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the slots handed over, {p}:handed
# KEYS[3]     the claims moved past, {p}:claimed
# ARGV[1]     the caller's token
# Returns     the slots taken, each "<slot>|<entry>" (none without the lease)
# Guarantee   only the lease holder takes them, and taking empties the set in the same step, so
#             each slot is taken once; each is recorded in {p}:claimed as the taker's claim, so
#             that a taker whose publish surely failed can hand it over again.
TAKE_HANDED_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {} end
local taken = redis.call('SMEMBERS', KEYS[2])
redis.call('DEL', KEYS[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
for _, member in ipairs(taken) do
  local slot, entry = string.match(member, '^(%d+)|(.*)$')
  redis.call('ZADD', KEYS[3], now, slot .. '|' .. ARGV[1] .. '|' .. entry)
end
return taken
"""

# Records where entries' slots start.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the fences, {p}:fired
# ARGV[1]     the caller's token
# ARGV[2..]   (entry, instant in epoch milliseconds, schedule fingerprint) triples
# Returns     without the lease, nothing; else flat (entry, fence value after the call) pairs,
#             one per given entry
# Guarantee   under one lease check, only an entry with no readable fence, or a fence of another
#             schedule, is anchored; every other fence, and every run count, is kept.
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

# Drops the fences and run counts of entries removed from the schedule.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the fences, {p}:fired
# KEYS[3]     the run counts, {p}:runs
# ARGV[1]     the caller's token
# ARGV[2..]   the entries' names
# Returns     1 if they were dropped, 0 if the caller does not hold the lease
# Guarantee   only the lease holder drops fences, so a deposed leader cannot delete the fences a
#             live leader relies on.
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

# Shortens the life of forgotten entries' histories (store/retention.py).
# KEYS[1]     the history prefix, {p}:history:
# ARGV[1]     the life left to each, in milliseconds (GONE_TTL_MS)
# ARGV[2..]   the entries' names
# Returns     1
# Guarantee   a history that exists lives at most ARGV[1] more (a later record gives it the life
#             of any history again); none is made or lengthened here.
RETIRE_HISTORY_SCRIPT = """
local life = tonumber(ARGV[1])
for i = 2, #ARGV do
  local left = redis.call('PTTL', KEYS[1] .. ARGV[i])
  if left == -1 or left > life then
    redis.call('PEXPIRE', KEYS[1] .. ARGV[i], life)
  end
end
return 1
"""

# Records that a beat is alive, and forgets the beats whose heartbeat expired.
# KEYS[1]     the heartbeats, {p}:beats (token -> role|last seen|expires|d<schedule digest>)
# ARGV[1]     the beat's token
# ARGV[2]     its role
# ARGV[3]     the heartbeat's time to live, in milliseconds
# ARGV[4]     the digest of the schedule it runs (no "|")
# Returns     1
# Guarantee   times come from the server's clock, so beats on hosts whose clocks disagree still
#             agree on who is alive; the hash itself expires once every beat has gone.
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

# Takes an entry's run lease for a task that starts.
# KEYS[1]     the entry's run lease, {p}:running:<entry>
# ARGV[1]     the task id
# ARGV[2]     the run lease's time to live, in milliseconds
# Returns     1 if the task holds the lease now, 0 if another task holds it
# Guarantee   one task at a time holds an entry's run lease; the task that holds it may take it
#             again, which restarts its time to live.
HOLD_RUN_SCRIPT = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# Keeps running tasks' run leases alive.
# KEYS[1]     the run-lease prefix, {p}:running:
# ARGV[1]     the run leases' new time to live, in milliseconds
# ARGV[2..]   (entry, task id) pairs
# Returns     the entries whose run lease was extended
# Guarantee   a run lease is extended only while the given task still holds it, so a renewal
#             never revives a lapsed lease or extends another task's.
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

# Gives up an entry's run lease when its run ends.
# KEYS[1]     the entry's run lease, {p}:running:<entry>
# ARGV[1]     the task id
# Returns     1 if the lease was deleted, 0 if that task did not hold it
# Guarantee   a run lease goes only while the given task holds it, so a late release spares the
#             next run.
RELEASE_RUN_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# Writes a document the leader keeps for every beat.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the document, {p}:roster or {p}:balance
# ARGV[1]     the caller's token
# ARGV[2]     the document's text
# Returns     1 if it was written, 0 if the caller does not hold the lease
# Guarantee   only the lease holder writes a shared document, so every beat reads the leader's.
SHARE_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2])
return 1
"""

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
# ARGV[1]     the version the caller last saw (0 for none)
# Returns     {version, 1 if every name is listed else 0, the number of triggers waiting, the
#             number of slots handed over}, then
#             (name, definition or "", pause record or "") for each name changed after ARGV[1];
#             no names for a caller already at the version
# Guarantee   one consistent read: the records are those of the version returned, so a reader
#             that asks again from that version misses no change; a reader from before the floor
#             (a removal's mark it never saw was dropped) gets every name.
READ_CHANGES_SCRIPT = """
local version = tonumber(redis.call('GET', KEYS[1]) or '0')
local since = tonumber(ARGV[1])
local out = {version, 0, redis.call('LLEN', KEYS[5]), redis.call('SCARD', KEYS[7])}
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

# Takes every waiting trigger off the queue.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the triggers waiting, {p}:triggers
# ARGV[1]     the caller's token
# Returns     the triggers taken, oldest first (none without the lease)
# Guarantee   only the lease holder takes triggers, and taking empties the queue in the same
#             step, so each trigger is taken once.
TAKE_TRIGGERS_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {} end
local taken = redis.call('LRANGE', KEYS[2], 0, -1)
redis.call('DEL', KEYS[2])
return taken
"""

# Puts back triggers whose publish surely failed.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the triggers waiting, {p}:triggers
# KEYS[3]     the version, {p}:version
# ARGV[1]     the caller's token
# ARGV[2..]   the triggers, oldest first
# Returns     1 if they were put back, 0 if the caller does not hold the lease
# Guarantee   only the lease holder gives triggers back; they return to the head of the queue in
#             their order, and the version rises so that they are seen again.
GIVE_BACK_TRIGGERS_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
for i = #ARGV, 2, -1 do
  redis.call('LPUSH', KEYS[2], ARGV[i])
end
redis.call('INCR', KEYS[3])
return 1
"""

# Appends an operator's change to the audit trail (store/operations.py), bounded.
# KEYS[1]     the audit trail, {p}:audit, a list of "<server ms>|<record>", oldest first
# ARGV[1]     the record (JSON, opaque here)
# ARGV[2]     the most records kept
# ARGV[3]     how long a record is kept, ms
# Returns     when the record was taken, the server's epoch ms
# Guarantee   records stay in the order they arrived, stamped by one clock; after each append
#             the trail holds at most ARGV[2] records and none older than ARGV[3].
WRITE_AUDIT_SCRIPT = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('RPUSH', KEYS[1], now .. '|' .. ARGV[1])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
local oldest = now - tonumber(ARGV[3])
while true do
  local head = redis.call('LINDEX', KEYS[1], 0)
  if not head then break end
  local at = tonumber(string.match(head, '^(%d+)|'))
  if at and at >= oldest then break end
  redis.call('LPOP', KEYS[1])
end
return now
"""

# Keeps the definitions a schedule digest runs (store/operations.py).
# KEYS[1]     the running schedules, {p}:schedules, a hash digest -> "<server ms>|<definitions>"
# ARGV[1]     the digest
# ARGV[2]     the definitions (JSON, opaque here)
# ARGV[3]     how many digests are kept
# Returns     1
# Guarantee   the digest holds these definitions; of the others, the most recently recorded stay,
#             so the hash holds at most ARGV[3] digests.
RECORD_SCHEDULE_SCRIPT = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('HSET', KEYS[1], ARGV[1], now .. '|' .. ARGV[2])
local keep = tonumber(ARGV[3])
while redis.call('HLEN', KEYS[1]) > keep do
  local all = redis.call('HGETALL', KEYS[1])
  local oldest, oldest_at = nil, nil
  for i = 1, #all, 2 do
    local at = tonumber(string.match(all[i + 1], '^(%d+)|')) or 0
    if oldest_at == nil or at < oldest_at then oldest, oldest_at = all[i], at end
  end
  redis.call('HDEL', KEYS[1], oldest)
end
return 1
"""

# Helper, put before the scripts that read the record of sent slots (store/sent.py):
# horizon(sent, since, keep, cap) is the instant (ms) from which {p}:sent knows what was sent, as
# store/sent.py's horizon computes it: the newest of when recording began (now if never), now
# less keep, and just after the oldest slot kept once the record holds cap slots.
SENT_HORIZON = """
local function horizon(sent, since, keep, cap)
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  local start = math.max(tonumber(redis.call('GET', since) or now), now - keep)
  if redis.call('ZCARD', sent) >= cap then
    local oldest = redis.call('ZRANGE', sent, 0, 0, 'WITHSCORES')
    if oldest[2] then start = math.max(start, tonumber(oldest[2]) + 1) end
  end
  return start
end
"""

# Tells which slots of one entry are recorded as sent, for a backfill's dry run.
# KEYS[1]     the slots recorded as sent, {p}:sent
# KEYS[2]     when recording sent slots began, {p}:sent-since
# ARGV[1]     the entry's name
# ARGV[2]     how long a sent slot is recorded, in milliseconds (SENT_KEEP_MS)
# ARGV[3]     the most sent slots recorded (SENT_CAP)
# ARGV[4..]   the slots asked about, epoch milliseconds
# Returns     the horizon (ms), then the slots asked about that are recorded
# Guarantee   reads only; the horizon and the slots are read at one instant.
RECORDED_SCRIPT = (
    SENT_HORIZON
    + """
local found = {horizon(KEYS[1], KEYS[2], tonumber(ARGV[2]), tonumber(ARGV[3]))}
for i = 4, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i] .. '|' .. ARGV[1]) then
    found[#found + 1] = ARGV[i]
  end
end
return found
"""
)

# Claims past slots of one entry for a backfill.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the slots recorded as sent, {p}:sent
# KEYS[3]     when recording sent slots began, {p}:sent-since
# KEYS[4]     the slots this claimer recorded, {p}:sent-by:<claimer>
# ARGV[1]     the caller's token
# ARGV[2]     the entry's name
# ARGV[3]     how long a sent slot is recorded, in milliseconds (SENT_KEEP_MS)
# ARGV[4]     the most sent slots recorded (SENT_CAP)
# ARGV[5]     how long the claimer's slots are remembered, in milliseconds (CLAIMER_KEEP_MS)
# ARGV[6..]   the slots to claim, epoch milliseconds
# Returns     0 if the caller does not hold the lease; else {horizon, the slots claimed, the
#             slots recorded already by others}; a slot before the horizon is in neither
# Guarantee   under one lease check, a slot is claimed only if it is at or after the horizon and
#             not recorded, or recorded by this same claimer (asking again after a lost reply),
#             and recording it is the claim, so no slot is claimed by two claimers, backfills'
#             or the regular claims' (CLAIM_SCRIPT); the fence is left alone.
CLAIM_SLOTS_SCRIPT = (
    SENT_HORIZON
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local start = horizon(KEYS[2], KEYS[3], tonumber(ARGV[3]), tonumber(ARGV[4]))
local claimed, sent = {}, {}
for i = 6, #ARGV do
  local slot = tonumber(ARGV[i])
  if slot >= start then
    local member = ARGV[i] .. '|' .. ARGV[2]
    if redis.call('ZADD', KEYS[2], 'NX', slot, member) == 1 then
      redis.call('SADD', KEYS[4], member)
      claimed[#claimed + 1] = ARGV[i]
    elseif redis.call('SISMEMBER', KEYS[4], member) == 1 then
      claimed[#claimed + 1] = ARGV[i]
    else
      sent[#sent + 1] = ARGV[i]
    end
  end
end
if #claimed > 0 then
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
end
return {start, claimed, sent}
"""
)

# Gives back a backfill's claims whose publish surely failed.
# KEYS[1]     the lease, {p}:leader
# KEYS[2]     the slots recorded as sent, {p}:sent
# KEYS[3]     the slots the claimer recorded, {p}:sent-by:<claimer>
# ARGV[1]     the caller's token
# ARGV[2]     the entry's name
# ARGV[3..]   the slots, epoch milliseconds
# Returns     the slots given back (none without the lease)
# Guarantee   only the lease holder gives back, and a slot given back is no longer recorded nor
#             the claimer's, so a later backfill can send it and this claimer cannot take it again.
UNCLAIM_SLOTS_SCRIPT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {}
end
local given = {}
for i = 3, #ARGV do
  local member = ARGV[i] .. '|' .. ARGV[2]
  redis.call('SREM', KEYS[3], member)
  if redis.call('ZREM', KEYS[2], member) == 1 then
    given[#given + 1] = ARGV[i]
  end
end
return given
"""
