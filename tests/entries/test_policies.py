"""The ``catch_up`` and ``overlap`` policies as enums: today's strings still name them, in the
settings and in an entry's options, a member is read, printed and stored as that string, and
any other value is refused with the message users already know."""

from __future__ import annotations

import json
from typing import Any

import pytest
from celery import Celery
from celery.exceptions import ImproperlyConfigured

from celery_hashbeat.entries.building import build_entry
from celery_hashbeat.entries.errors import EntryError
from celery_hashbeat.entries.sharing import SharedSlots
from celery_hashbeat.settings import CatchUp, Overlap, Settings

NOW = 1_900_000_000_000

#: Every policy value the settings and entry options accepted before they were enums.
CATCH_UP_TEXTS = ("latest", "all", "skip")
OVERLAP_TEXTS = ("allow", "skip", "buffer_one", "replace")


def settings_from(**conf: Any) -> Settings:
    return Settings.from_conf(Celery("policies", set_as_current=False, config_source=conf).conf)


def build(**options: Any) -> Any:
    app = Celery("policies", set_as_current=False, config_source={"timezone": "UTC"})
    definition = {"task": "t", "schedule": 60, **options}
    return build_entry("e", definition, Settings(), SharedSlots(app), NOW)


def test_the_enums_hold_exactly_the_policies_of_old() -> None:
    assert [member.value for member in CatchUp] == list(CATCH_UP_TEXTS)
    assert [member.value for member in Overlap] == list(OVERLAP_TEXTS)


@pytest.mark.parametrize("text", CATCH_UP_TEXTS)
def test_each_catch_up_setting_and_option_of_old_names_its_member(text: str) -> None:
    assert settings_from(hashbeat_catch_up=text).catch_up is CatchUp(text)
    assert build(catch_up=text).catch_up is CatchUp(text)


@pytest.mark.parametrize("text", OVERLAP_TEXTS)
def test_each_overlap_setting_and_option_of_old_names_its_member(text: str) -> None:
    assert settings_from(hashbeat_overlap=text).overlap is Overlap(text)
    assert build(overlap=text).overlap is Overlap(text)


def test_the_defaults_are_latest_and_allow() -> None:
    settings = settings_from()
    assert settings.catch_up is CatchUp.LATEST and settings.overlap is Overlap.ALLOW


@pytest.mark.parametrize("member", [*CatchUp, *Overlap])
def test_a_member_reads_prints_and_stores_as_its_text(member: CatchUp | Overlap) -> None:
    text = member.value
    assert member == text and hash(member) == hash(text)
    assert (str(member), f"{member}", f"{member:>12}", repr(member)) == (
        text,
        text,
        f"{text:>12}",
        repr(text),
    )
    assert "%s %r" % (member, member) == f"{text} {text!r}"  # noqa: UP031 - the log's style
    assert json.dumps({"policy": member}) == json.dumps({"policy": text})
    assert str.encode(member) == text.encode()  # what a store client writes


@pytest.mark.parametrize(
    ("setting", "bad", "message"),
    [
        ("hashbeat_catch_up", "newest", "must be one of 'latest', 'all', 'skip', not 'newest'"),
        ("hashbeat_catch_up", "LATEST", "must be one of 'latest', 'all', 'skip', not 'LATEST'"),
        ("hashbeat_catch_up", ["all"], "must be one of 'latest', 'all', 'skip', not ['all']"),
        (
            "hashbeat_overlap",
            "queue",
            "must be one of 'allow', 'skip', 'buffer_one', 'replace', not 'queue'",
        ),
        (
            "hashbeat_overlap",
            "latest",
            "must be one of 'allow', 'skip', 'buffer_one', 'replace', not 'latest'",
        ),
    ],
)
def test_any_other_setting_is_refused_naming_the_choices(
    setting: str, bad: object, message: str
) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        settings_from(**{setting: bad})
    assert str(refused.value) == f"{setting} {message}"


@pytest.mark.parametrize(
    ("option", "bad", "message"),
    [
        ("catch_up", "newest", "catch_up must be one of 'latest', 'all', 'skip', not 'newest'"),
        (
            "overlap",
            "all",
            "overlap must be one of 'allow', 'skip', 'buffer_one', 'replace', not 'all'",
        ),
    ],
)
def test_any_other_entry_option_is_refused_naming_the_entry(
    option: str, bad: str, message: str
) -> None:
    with pytest.raises(EntryError) as refused:
        build(**{option: bad})
    assert str(refused.value) == f"entry 'e': {message}"


def test_buffer_one_still_refuses_catch_up_all() -> None:
    with pytest.raises(EntryError, match="overlap 'buffer_one' keeps only the most recent"):
        build(overlap="buffer_one", catch_up="all")
