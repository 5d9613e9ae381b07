"""The Lua scripts of run leases: one task at a time runs a guarded entry."""

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
