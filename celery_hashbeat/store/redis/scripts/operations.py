"""The Lua scripts of the operators' records (store/operations.py): audit trail, schedules run."""

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
