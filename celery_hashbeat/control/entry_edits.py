"""The checks an edit of a store entry (``ScheduleAdmin.add``, ``update``, ``remove``) passes
before anything is written: the entry is the store's to change, the changed fields exist, and
the definition builds as the beats will build it (docs/design.md §13)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from celery_hashbeat.control.definitions import STORED_KEYS, decode, encode
from celery_hashbeat.control.refusals import AdminError, ConflictError, check_name_or_refuse
from celery_hashbeat.control.stored_text import DefinitionError
from celery_hashbeat.entries.catalog import Catalog
from celery_hashbeat.entries.errors import EntryError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from celery import Celery

    from celery_hashbeat.settings import Settings


def refuse_configured(name: str, configured: Callable[[], Mapping[str, Any]], what: str) -> None:
    """Refuse ``what`` (add, update, remove) on an entry of beat_schedule (``configured``
    reads it, once the name is known to be one): its configuration owns it."""
    check_name_or_refuse(name)
    if name in configured():
        raise AdminError(
            f"entry {name!r} is in beat_schedule, so it cannot be changed with {what}: edit "
            f"the configuration instead (pause, resume and trigger work on it)"
        )


def check_changes(name: str, changes: Mapping[str, Any]) -> None:
    """The fields an update changes: stored keys only, and never task or schedule removed."""
    unknown = set(changes) - set(STORED_KEYS)
    if unknown:
        raise AdminError(f"cannot update {sorted(unknown)}; fields: {', '.join(STORED_KEYS)}")
    for key in ("task", "schedule"):
        if key in changes and changes[key] is None:
            raise AdminError(f"entry {name!r}: {key!r} cannot be removed, only changed")


def check_revision(name: str, revision: int | None, current_revision: int) -> None:
    """The revision an update expects (None: any) is the stored one."""
    if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int)):
        raise AdminError(f"entry {name!r}: revision must be a whole number, not {revision!r}")
    if revision is not None and revision != current_revision:
        raise ConflictError(conflict(name, f"it is at revision {current_revision}"))


def conflict(name: str, why: str) -> str:
    """The words of an update that lost a race (ConflictError)."""
    return (
        f"entry {name!r} was not updated: {why}, by another update since this one read it; "
        f"nothing was written: read it again (hashbeat show {name}) and repeat the change"
    )


def decoded(name: str, stored: str) -> tuple[dict[str, Any], int]:
    """A stored definition and its revision; one that does not read back is replaced whole by
    the update, which must then give task and schedule."""
    try:
        read = decode(name, stored)
    except DefinitionError:
        return {}, 0
    return read.definition, read.revision


def checked_text(
    app: Celery,
    settings: Settings,
    now_ms: Callable[[], int],
    name: str,
    definition: dict[str, Any],
    any_task: bool,
    revision: int,
) -> str:
    """The definition's stored text, once it is known to build as the beats will."""
    try:
        text = encode(name, definition, now_ms(), revision)
        built = decode(name, text).definition
        Catalog.trial(app, settings, now_ms(), name, built, written=True)
    except (DefinitionError, EntryError) as exc:
        raise AdminError(str(exc)) from None
    task = definition["task"]
    if not any_task and task not in app.tasks:
        raise AdminError(
            f"entry {name!r}: task {task!r} is not registered in app {app.main!r}; "
            f"check its name, or, for a task only the workers import, allow it "
            f"(allow_unregistered_task=True, or --allow-unregistered-task)"
        )
    return text
