"""Why an operator's change was refused: ``AdminError`` and its kinds, each with the ``hashbeat``
command's exit code, and the checks every ``ScheduleAdmin`` method shares (docs/design.md §13).
Nothing refused here was written."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from celery_hashbeat.control import backfill as backfills
from celery_hashbeat.control.definitions import check_name
from celery_hashbeat.control.stored_text import DefinitionError
from celery_hashbeat.entries.errors import EntryError
from celery_hashbeat.errors import HashbeatError
from celery_hashbeat.schedules import at as at_schedule
from celery_hashbeat.store import StoreConfigError, StoreError, StoreReadOnly


class AdminError(ValueError, HashbeatError):
    """A change refused; nothing was written. The message says what was wrong and what to do."""

    #: The ``hashbeat`` command's exit code for it (2: bad input, as click's usage errors).
    exit_code = 2


class UnknownEntryError(AdminError):
    """No entry of that name, in the configuration or the store."""

    exit_code = 3


class StoreProblemError(AdminError):
    """The store could not be used: unreachable, refusing the credentials, read-only (then
    ``read_only`` is True), or its URL or options malformed. Nothing is known to have been
    written."""

    exit_code = 4
    read_only = False


class ConflictError(AdminError):
    """An update lost a race: the entry was changed or removed after it was read. Nothing was
    written; read it again and repeat the change."""

    exit_code = 5


class RunInProgressError(AdminError):
    """A trigger not queued: the entry's overlap is ``skip`` and a run of it holds its run
    lease. ``force=True`` (``hashbeat trigger --force``) runs it anyway."""

    exit_code = 6


P = ParamSpec("P")
R = TypeVar("R")


def admin_errors(method: Callable[P, R]) -> Callable[P, R]:
    """Turn every failure of ``method`` into an AdminError (or one of its subclasses): the
    store's (its password masked), a definition refused by a decoder."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except AdminError:
            raise
        except (StoreError, StoreConfigError) as exc:
            raise store_problem(exc) from None
        except (DefinitionError, EntryError, backfills.BackfillError) as exc:
            raise AdminError(str(exc)) from None

    return wrapper


def store_problem(exc: StoreError | StoreConfigError) -> StoreProblemError:
    """The store's error for an operator, who is not retried: without the beats' "; will
    retry", read-only said as such."""
    text = str(exc).removesuffix("; will retry")
    problem = StoreProblemError(text)
    problem.read_only = isinstance(exc, StoreReadOnly)
    return problem


def one_shot_or(name: str, schedule: Any, when: Any) -> Any:
    """The schedule ``add`` was given: ``schedule``, or ``at(when)``, exactly one of them."""
    if (schedule is None) == (when is None):
        raise AdminError(f"entry {name!r}: give a schedule, or at=... for a one-shot, and not both")
    if when is None:
        return schedule
    try:
        return at_schedule(when)
    except ValueError as exc:
        raise AdminError(f"entry {name!r}: {exc}") from None


def check_text(name: object) -> None:
    """An entry name given to a method that looks one up: text, not empty."""
    if not isinstance(name, str) or not name:
        raise AdminError(
            f"entry name {name!r}: give the entry's name as text (hashbeat entries lists them)"
        )


def check_name_or_refuse(name: str) -> None:
    check_text(name)
    try:
        check_name(name)
    except DefinitionError as exc:
        raise AdminError(str(exc)) from None
