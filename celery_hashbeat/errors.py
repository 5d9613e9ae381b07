"""The root of the errors celery_hashbeat raises, so a caller can catch all of them in one clause.

Each error keeps the standard base it always had (``ValueError`` for bad input, ``LookupError``
for a search with no answer), so code that catches those keeps working; ``HashbeatError`` is
added beside it. A leaf: anyone in the package may import it.
"""

from __future__ import annotations


class HashbeatError(Exception):
    """Anything celery_hashbeat raises on purpose (bad input, a store or schedule that fails)."""
