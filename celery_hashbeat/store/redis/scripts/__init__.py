"""Every Lua script of the Redis store, one named constant each, each with its header.

Every change that takes more than one step (check the lease, then write) is one script, so that
Redis runs it whole and no other client sees it half done. The modules here group the scripts by
what they serve: the lease and the beats' shared state (lease.py), fenced claims (claims.py),
run leases (runs.py), history (history.py), the runtime controls and triggers (controls.py), the
record of sent slots (sent.py), and the operators' records (operations.py). Above each script,
its header says:

- KEYS: each key it is given (store/redis/keys.py spells them; a key "prefix" is one the script
  completes with an entry's name, which keeps it in the prefix's cluster slot);
- ARGV: each argument, with its unit;
- Returns: the reply's shape and meaning;
- Guarantee: what holds however many beats, workers and operators run it at once.

Times are milliseconds. ``{p}`` is the hash tag of the store's prefix. A helper (a constant not
named ``*_SCRIPT``) is a Lua function that scripts put before their own text. The scripts are
text only: the store registers them (Connection.script) and Redis runs them by their SHA.
"""
