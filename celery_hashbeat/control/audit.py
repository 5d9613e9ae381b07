"""The audit trail: who changed what in the schedule, when, and why (docs/design.md §19).

Every operator change made through ``ScheduleAdmin`` (add, update, remove, pause, resume,
trigger, backfill; the ``hashbeat`` commands and the web console go through it) is recorded in
the store (``Store.write_audit``) right after it landed: when (the store's clock), who (the OS
user and host of the process, the user a caller such as the console names, the store's ACL user
where the URL names one), what (the action and the entry), the definition or pause before and
after, and the reason given. The store keeps the newest ``AUDIT_KEEP`` records, none older than
``AUDIT_KEEP_MS`` (store/operations.py). A record is JSON; one that does not read back (written
by hand) is skipped when read.
"""

from __future__ import annotations

import getpass
import json
import socket
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from celery_hashbeat.store.operations import AUDIT_KEEP

if TYPE_CHECKING:
    from celery_hashbeat.store import Store

#: The changes recorded.
ACTIONS = ("add", "update", "remove", "pause", "resume", "trigger", "backfill")


@dataclass(frozen=True)
class Who:
    """Who made a change, as far as the process can tell."""

    #: The OS user and host of the process that made it.
    os_user: str
    host: str
    #: The user a caller names (the Django user of the console), "" when none.
    user: str = ""
    #: The store's user (a Redis ACL user) where the store URL names one, "" otherwise.
    store_user: str = ""

    def __str__(self) -> str:
        shown = f"{self.os_user}@{self.host}"
        if self.user:
            shown = f"{self.user} ({shown})"
        return f"{shown} as {self.store_user}" if self.store_user else shown


def who_am_i(user: str | None, store_url: str) -> Who:
    """This process's operator: OS user, host, the caller's ``user``, the store URL's user."""
    try:
        os_user = getpass.getuser()
    except Exception:  # no login name (a container without one): say so rather than fail
        os_user = "?"
    try:
        store_user = urlsplit(store_url).username or ""
    except ValueError:
        store_user = ""
    return Who(os_user, socket.gethostname(), user or "", store_user)


@dataclass(frozen=True)
class Change:
    """One record of the trail."""

    action: str
    name: str
    who: Who
    #: What the entry's record was before and after (a definition or pause as JSON data, a
    #: trigger's or backfill's request); None where there was none.
    before: Any = None
    after: Any = None
    reason: str = ""
    #: When the store took it (epoch ms); 0 until it did.
    at_ms: int = 0
    #: Anything more the action says (a trigger's task id, a backfill's slot count).
    details: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["who"] = asdict(self.who)
        return data


def record(store: Store, change: Change) -> int:
    """Write ``change`` to the store's trail; returns when the store took it (epoch ms)."""
    data = change.as_json()
    del data["at_ms"]
    return store.write_audit(json.dumps(data, sort_keys=True, default=str))


def trail(store: Store, name: str | None = None, limit: int = AUDIT_KEEP) -> list[Change]:
    """The trail, newest first: every change, or only those of entry ``name``; at most
    ``limit`` of them."""
    changes = []
    for at_ms, text in store.audit_trail():
        change = _decoded(at_ms, text)
        if change is not None and (name is None or change.name == name):
            changes.append(change)
            if len(changes) >= limit:
                break
    return changes


def as_data(text: str | None) -> Any:
    """A stored JSON record (a pause, a trigger) as data for the trail; None for none."""
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return text


def _decoded(at_ms: int, text: str) -> Change | None:
    try:
        data = json.loads(text)
        who = Who(**data.pop("who"))
        return Change(who=who, at_ms=at_ms, **data)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
