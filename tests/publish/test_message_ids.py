"""A slot's task id is uuid5 of its entry and slot, and the delivery tags are version-4 UUIDs,
though both are made without ``uuid.UUID`` (a burst makes thousands)."""

from __future__ import annotations

import os
import uuid

import pytest

from celery_hashbeat.publish.message import NAMESPACE, slot_task_id, unique_uuid


@pytest.mark.parametrize(
    "entry", ["nightly-report", "", "é-ünïcode-名前", "a|b", "x" * 300, "copy@worker-1.example"]
)
@pytest.mark.parametrize("slot", [0, 1, 1_893_456_000_000, 2**53])
def test_slot_task_id_is_the_uuid5_of_entry_and_slot(entry: str, slot: int) -> None:
    assert slot_task_id(entry, slot) == str(uuid.uuid5(NAMESPACE, f"{entry}|{slot}"))


def test_unique_uuids_are_version_4_and_distinct() -> None:
    made = [unique_uuid() for _ in range(2000)]
    assert len(set(made)) == len(made)
    for text in made:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_slot_task_ids_match_uuid5_whatever_their_variant_digit() -> None:
    """Enough slots that every hex digit occurs where the variant is set."""
    ids = {slot: slot_task_id("every-minute", slot) for slot in range(0, 60_000 * 500, 60_000)}
    assert {text[19] for text in ids.values()} == set("89ab")
    assert ids == {slot: str(uuid.uuid5(NAMESPACE, f"every-minute|{slot}")) for slot in ids}


def test_a_forked_child_makes_other_tags_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next tags, to the parent
        os.write(write, " ".join(unique_uuid() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        theirs = pipe.read().split()
    mine = [unique_uuid() for _ in range(3)]
    assert len(theirs) == 3 and not set(theirs) & set(mine)
    assert {tag[:24] for tag in theirs} != {tag[:24] for tag in mine}
