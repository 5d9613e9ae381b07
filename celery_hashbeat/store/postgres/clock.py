"""The server's clock in SQL, spelled once: every time the PostgreSQL store keeps or compares is
the server's (docs/design.md §5), so the beats' clocks never decide a lease or an expiry."""

#: ``clock_timestamp()`` plus %s milliseconds: when a lease, run lease or lifetime ends.
LATER = "clock_timestamp() + %s * interval '1 millisecond'"
#: The server's wall clock in epoch milliseconds, for people to read and for the record's start.
NOW_MS = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
#: The statement's start in epoch milliseconds: stable within the statement, unlike NOW_MS, so a
#: bound made of it is a range of the key that an index scan can stop at.
STATEMENT_MS = "(extract(epoch FROM statement_timestamp()) * 1000)::bigint"
