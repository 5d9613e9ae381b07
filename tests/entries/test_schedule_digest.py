"""The schedule digest names a beat's schedule in the store (``hashbeat plan`` finds the recorded
schedule by it), so its text is fixed: each name, 0x1f, its fingerprint, 0x1e, names sorted."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Any

from celery_hashbeat.entries.sharing import schedule_digest


def test_the_digest_is_the_sorted_names_and_fingerprints_spelled_out() -> None:
    prints = {"b": "00ff", "a": "1234", "report-10": "beef", "report-9": "cafe", "c": "00ff"}
    entries: dict[str, Any] = {name: SimpleNamespace(fingerprint=fp) for name, fp in prints.items()}
    text = "a\x1f1234\x1eb\x1f00ff\x1ec\x1f00ff\x1ereport-10\x1fbeef\x1ereport-9\x1fcafe\x1e"
    assert schedule_digest(entries) == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert schedule_digest(dict(reversed(entries.items()))) == schedule_digest(entries)
    assert schedule_digest({"a": entries["a"]}) == hashlib.sha256(b"a\x1f1234\x1e").hexdigest()[:16]
    assert schedule_digest({}) == hashlib.sha256(b"").hexdigest()[:16]
