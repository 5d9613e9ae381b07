"""The Lua scripts that keep entries' histories; the helper the other history carriers share."""

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
