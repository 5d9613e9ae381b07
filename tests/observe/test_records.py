"""History records (celery_hashbeat/observe/history.py): one line of JSON each, read back as
written."""

from __future__ import annotations

import json

from celery_hashbeat.observe.history import Outbox, Record, decode, encode, sent_text

TASK = "6f1c2a4e-1111-2222-3333-444455556666"


def test_a_record_round_trips_without_its_unknown_fields() -> None:
    record = Record("missed", 1_000, 2_000, "host:1:ab", reason="catch_up=skip", count=3)
    text = encode(record)
    assert json.loads(text) == {
        "outcome": "missed",
        "slot": 1_000,
        "at": 2_000,
        "by": "host:1:ab",
        "reason": "catch_up=skip",
        "count": 3,
    }
    assert decode(text) == record


def test_the_sent_record_written_out_is_the_encoded_one() -> None:
    """The beat writes its most common record with a format string: it must be the same text."""
    token = 'host "quoted":1:ab'
    record = Record("sent", 1_000, 1_004, token, TASK, lateness_ms=4)
    assert sent_text(1_000, 1_004, json.dumps(token), TASK, 4) == encode(record)


def test_what_is_not_a_record_reads_as_none_and_newer_fields_are_ignored() -> None:
    for text in ("", "x", "[]", '{"slot": 1}', '{"outcome": "sent", "at": "soon"}'):
        assert decode(text) is None, text
    newer = decode('{"outcome": "sent", "slot": 5, "at": 6, "shard": 3}')
    assert newer == Record("sent", 5, 6)


def test_the_outbox_drains_oldest_first_and_keeps_only_its_newest() -> None:
    outbox = Outbox(cap=3)
    for n in range(5):
        outbox.add("x", Record("sent", n, n))
    assert [decode(text).slot for _, text in outbox.drain()] == [2, 3, 4]  # type: ignore[union-attr]
    assert outbox.drain() == []
