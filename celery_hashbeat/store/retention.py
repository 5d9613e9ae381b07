"""How long the store keeps records of things that are gone (docs/operations.md, "What the store
keeps, and for how long").

Entries and workers come and go; what the store keeps of them must not grow with every one that
ever existed. So every record that outlives its subject has a bounded life, on Redis (key
expiries) and SQLite (expiry rows, purged) alike:

- an entry's history lives HISTORY_TTL_MS after its last record: every record refreshes it, so
  the history of any entry that still runs (the rarest yearly job records once a year) never
  goes, and one left behind goes at the latest that long after;
- when the leader forgets an entry (removed, or the copy of a worker that left), its history is
  kept GONE_TTL_MS more, for operators to read, then goes;
- the mark a removed name leaves in the runtime controls (so that polling beats learn of the
  removal) is dropped by the first change made GONE_TTL_MS or more after it; a beat whose last
  poll is older than a dropped mark reads every name again instead.

Read as ``retention.GONE_TTL_MS`` at each call, never copied, so a test may shorten it.
"""

from __future__ import annotations

DAY_MS = 86_400_000

#: How long a history lives after its last record (ms): longer than a year, so a yearly entry's
#: history is refreshed before it could lapse.
HISTORY_TTL_MS = 400 * DAY_MS

#: How long the records of a forgotten entry, and the mark of a removed name, are kept (ms).
GONE_TTL_MS = 7 * DAY_MS
