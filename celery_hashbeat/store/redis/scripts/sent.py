"""The Lua scripts of the record of sent slots (store/sent.py), which backfills claim through."""

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
