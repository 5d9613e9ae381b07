"""An outage is two log lines, whatever happens between them; a warning is said once."""

from __future__ import annotations

import logging

import pytest

from celery_hashbeat._outage import Once, Outage

LOGGER = logging.getLogger("tests.outage")


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER.name]


def test_an_outage_logs_when_it_begins_and_when_it_ends_and_nothing_between(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER.name)
    outage = Outage(LOGGER, "the store answers again (after: %(cause)s)")
    outage.answered()
    began = [outage.failed(OSError(f"refused {n}"), "the store is down (%s)", n) for n in range(3)]
    assert began == [True, False, False]
    assert outage.cause == "refused 2"
    outage.answered()
    outage.answered()
    assert outage.cause is None
    assert lines(caplog) == [
        ("WARNING", "the store is down (0)"),
        ("INFO", "the store answers again (after: refused 2)"),
    ]


def test_a_second_outage_is_told_again_at_the_level_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER.name)
    outage = Outage(LOGGER, "written again")
    outage.failed(TimeoutError(), "first", level=logging.ERROR, traceback=True)
    outage.answered()
    outage.failed(TimeoutError(), "second")
    assert outage.cause == "TimeoutError"  # a failure without text is named by its type
    assert lines(caplog) == [("ERROR", "first"), ("INFO", "written again"), ("WARNING", "second")]
    tracebacks = [r.exc_info is not None for r in caplog.records if r.name == LOGGER.name]
    assert tracebacks == [True, False, False]


def test_each_thing_is_said_once_until_forgotten() -> None:
    once = Once()
    assert [once.first(thing) for thing in ("a", ("b", 1), "a", ("b", 1), "c")] == [
        True,
        True,
        False,
        False,
        True,
    ]
    once.clear()
    assert once.first("a")


def test_a_single_line_is_said_once() -> None:
    once = Once()
    assert [once.first(), once.first()] == [True, False]
