"""The Lua scripts of the lease and of the state the beats share: heartbeats, shared documents."""

from celery_hashbeat.store.redis.scripts.history import RECORD_HISTORY

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
