"""One root for the errors celery_hashbeat raises on purpose, each keeping its standard base."""

from __future__ import annotations

import pytest

from celery_hashbeat import (
    AdminError,
    ConflictError,
    CronSyntaxError,
    NoFireTimeError,
    RunInProgressError,
    StoreProblemError,
    UnknownEntryError,
    parse,
)
from celery_hashbeat.control.stored_text import DefinitionError
from celery_hashbeat.entries.errors import EntryError, FanOutError, ScheduleEnded
from celery_hashbeat.errors import HashbeatError
from celery_hashbeat.observe.http import PortInUse
from celery_hashbeat.store import StoreConfigError, StoreError, StoreReadOnly, StoreUnavailable


@pytest.mark.parametrize(
    ("error", "standard_base"),
    [
        (CronSyntaxError, ValueError),
        (NoFireTimeError, LookupError),
        (AdminError, ValueError),
        (UnknownEntryError, ValueError),
        (ConflictError, AdminError),
        (RunInProgressError, AdminError),
        (StoreProblemError, AdminError),
        (DefinitionError, ValueError),
        (EntryError, ValueError),
        (FanOutError, ValueError),
        (ScheduleEnded, ValueError),
        (StoreConfigError, ValueError),
        (StoreError, Exception),
        (StoreReadOnly, StoreUnavailable),
        (PortInUse, Exception),
    ],
)
def test_each_error_is_a_hashbeat_error_and_keeps_its_standard_base(
    error: type[Exception], standard_base: type[Exception]
) -> None:
    assert issubclass(error, HashbeatError)
    assert issubclass(error, standard_base)


def test_one_except_clause_catches_a_bad_expression() -> None:
    with pytest.raises(HashbeatError, match="minute"):
        parse("61 * * * *")
