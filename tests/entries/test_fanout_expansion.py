"""FanOut.expand takes a schedule of plain dicts without ``workers`` in one step
(entries/fanout.py): what it hands back must be what the entry-by-entry path gives."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from celery_hashbeat.entries.fanout import FanOut

NODES = ["celery@a", "celery@b"]


def plain(n: int) -> dict[str, Any]:
    return {f"job-{i}": {"task": "t", "schedule": 60} for i in range(n)}


def test_plain_dicts_are_handed_back_as_given_in_order() -> None:
    schedule = plain(5)
    expansion = FanOut().expand(schedule)
    assert list(expansion.plain.items()) == list(schedule.items())
    assert not expansion.broken and not expansion.gone


def test_any_fanned_definition_is_fanned_out_whatever_its_mapping() -> None:
    for fanned in (
        {"task": "t", "schedule": 60, "workers": NODES},
        MappingProxyType({"task": "t", "schedule": 60, "workers": NODES}),
    ):
        expansion = FanOut().expand({**plain(3), "fanned": fanned})
        assert list(expansion.plain) == [
            "job-0",
            "job-1",
            "job-2",
            "fanned@celery@a",
            "fanned@celery@b",
        ]


def test_a_definition_that_is_no_mapping_is_handed_on_to_be_refused() -> None:
    odd = object()
    expansion = FanOut().expand({**plain(2), "odd": odd})
    assert list(expansion.plain.items()) == [*plain(2).items(), ("odd", odd)]


def test_an_entry_no_longer_fanned_out_takes_its_copies_away() -> None:
    fanout = FanOut()
    fanout.expand({"fanned": {"task": "t", "schedule": 60, "workers": NODES}})
    expansion = fanout.expand({"fanned": {"task": "t", "schedule": 60}})
    assert expansion.gone == {"fanned@celery@a", "fanned@celery@b"}
    assert list(expansion.plain) == ["fanned"]
    assert not fanout.subs
