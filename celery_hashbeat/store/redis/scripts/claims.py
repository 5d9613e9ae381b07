"""The Lua scripts of fenced claims: claiming due slots, giving them back, handing them over."""

from celery_hashbeat.store.redis.scripts.history import RECORD_HISTORY

# Helper, put before the scripts that read fences: parse(value) reads a fence as store/values.py's
# parse_stored does (slot, token, previous, fingerprint; a bare slot of release 0.1 is a claim by
# "-"), or gives nil for a value that does not parse, which the scripts treat as absent, so that
# no script ever fails on a stored value.
PARSE_FENCE = """
local function parse(value)
  if not value then return nil end
  local slot, token, previous, fingerprint = string.match(
    value, '^(%d+)|([^|]*)|(a?%d*)|(.*)$')
  if slot then
    if previous == 'a' then return nil end
    return slot, token, previous, fingerprint
  end
  if string.match(value, '^%d+$') then return value, '-', '', '' end
  return nil
end
"""

# Helpers, put before the scripts that read or write many fields of one hash: in as few commands
# as Lua's stack allows (FIELDS_PER_CALL per command), not one per field.
# read_fields(key, fields) gives each field's value (false for none) in order;
# write_pairs(command, key, pairs) runs a command that takes flat pairs (HSET: field, value;
# ZADD: score, member) over all of them.
HASH_FIELDS = """
local FIELDS_PER_CALL = 500
local function read_fields(key, fields)
  local values = {}
  for first = 1, #fields, FIELDS_PER_CALL do
    local part = redis.call('HMGET', key, unpack(fields, first,
      math.min(first + FIELDS_PER_CALL - 1, #fields)))
    for i = 1, #part do values[first + i - 1] = part[i] end
  end
  return values
end
local function write_pairs(command, key, pairs)
  for first = 1, #pairs, 2 * FIELDS_PER_CALL do
    local last = math.min(first + 2 * FIELDS_PER_CALL - 1, #pairs)
    redis.call(command, key, unpack(pairs, first, last))
  end
end
"""

# Helper, put after HASH_FIELDS before the claim script: the record of sent slots read for a
# whole claim in one command rather than one command per slot (a command from Lua costs about as
# much as the rest of a slot's claim); the claim writes it with write_pairs('ZADD', ...).
# recorded(key, low, high, count) gives the set of members scored low..high, or nil when the
# span holds more than count + RECORDS_READ_SLACK of them (a catch-up's long span: the caller
# then checks each slot as it adds it, with ZADD NX).
SENT_RECORDS = """
local RECORDS_READ_SLACK = 256
local function recorded(key, low, high, count)
  local limit = count + RECORDS_READ_SLACK
  local members = redis.call('ZRANGEBYSCORE', key, low, high, 'LIMIT', 0, limit + 1)
  if #members > limit then return nil end
  local found = {}
  for i = 1, #members do found[members[i]] = true end
  return found
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
#             (checked for the whole claim by one read of the claimed slots' span of the record,
#             or, when that span holds too many records, by each slot's ZADD NX), the record
#             trimmed by age and count at one command each; the history is recorded whatever
#             the answer.
CLAIM_SCRIPT = (
    PARSE_FENCE
    + HASH_FIELDS
    + SENT_RECORDS
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
-- Each claim's fields, read in place from the packed argument (one match per claim, its
-- fingerprint the rest of it), into one table per field.
local sub, match = string.sub, string.match
local names, wanted_texts, modes, ttls, tasks, prints = {}, {}, {}, {}, {}, {}
local count, at, size = 0, 1, #packed
while at <= size do
  local length, colon, name_length, named = match(packed, '^(%d+)():(%d+)():', at)
  local stop = colon + tonumber(length)
  local name_end = named + tonumber(name_length)
  count = count + 1
  names[count] = sub(packed, named + 1, name_end)
  local wanted_text, mode, ttl, task, rest = match(
    packed, '^(%d+)|([^|]*)|(%d*)|([^|]*)|()', name_end + 1)
  wanted_texts[count], modes[count], ttls[count], tasks[count] = wanted_text, mode, ttl, task
  prints[count] = sub(packed, rest, stop)
  at = stop + 1
end
local me = ARGV[1]
local fences = read_fields(KEYS[2], names)
-- First whether each claim may be made: its own claim retried ("mine"), or a slot past the
-- entry's fence, then not recorded as sent (read for all of them at once).
local slots, tokens, owned, open = {}, {}, {}, {}
local low, high, opened = math.huge, -math.huge, 0
for i = 1, count do
  local slot, token = parse(fences[i])
  local wanted = tonumber(wanted_texts[i])
  slots[i], tokens[i] = slot, token
  if slot and token == me and tonumber(slot) == wanted then
    owned[i] = true
  elseif not slot or wanted > tonumber(slot) then
    open[i] = true
    opened = opened + 1
    if wanted < low then low = wanted end
    if wanted > high then high = wanted end
  end
end
local known = nil
if opened > 0 then known = recorded(KEYS[7], low, high, opened) end
local fenced, counted, sent_pairs = {}, {}, {}
local results, fences_out, sends = 0, 0, 0
for i = 1, count do
  local entry, wanted_text, mode = names[i], wanted_texts[i], modes[i]
  local slot, token = slots[i], tokens[i]
  local mine = owned[i]
  local sent = wanted_text .. '|' .. entry
  local fresh = false
  if open[i] then
    if known then
      fresh = not known[sent]
    else
      fresh = redis.call('ZADD', KEYS[7], 'NX', wanted_text, sent) == 1
    end
  end
  if mine or fresh then
    local holder = ''
    if mode ~= '' then
      holder = redis.call('GET', KEYS[3] .. entry) or ''
      if holder == tasks[i] then holder = '' end
      if holder == '' or mode == 'replace' then
        redis.call('SET', KEYS[3] .. entry, tasks[i], 'PX', ttls[i])
      end
    end
    if mode == 'buffer_one' and holder ~= '' then
      if fresh and not known then redis.call('ZREM', KEYS[7], sent) end
      result[results + 1], result[results + 2] = entry, '-' .. holder
      results = results + 2
    else
      if not mine then
        local previous = ''
        if slot then previous = (token == '' and 'a' or '') .. slot end
        if slot and token ~= '' and token ~= '-' and token ~= me then
          redis.call('ZADD', KEYS[6], now, slot .. '|' .. token .. '|' .. entry)
        end
        fenced[fences_out + 1] = entry
        fenced[fences_out + 2] = wanted_text .. '|' .. me .. '|' .. previous .. '|' .. prints[i]
        fences_out = fences_out + 2
        counted[#counted + 1] = entry
        if known then
          sent_pairs[sends + 1], sent_pairs[sends + 2] = wanted_text, sent
          sends = sends + 2
        end
      end
      if holder ~= '' then
        result[results + 1], result[results + 2] = entry, holder
        results = results + 2
      end
    end
  else
    result[results + 1], result[results + 2] = entry, '!'
    results = results + 2
  end
end
write_pairs('ZADD', KEYS[7], sent_pairs)
-- The entries are distinct: each one's fence and run count is written once, after all are read.
write_pairs('HSET', KEYS[2], fenced)
local runs = read_fields(KEYS[5], counted)
local counts = {}
for i = 1, #counted do
  counts[2 * i - 1], counts[2 * i] = counted[i], (tonumber(runs[i]) or 0) + 1
end
write_pairs('HSET', KEYS[5], counts)
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
