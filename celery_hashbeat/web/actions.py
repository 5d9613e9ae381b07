"""The console's actions on one entry, through ScheduleAdmin, logged and audited with who asked.
The standalone app and the Django admin both call ``act``, so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Mapping

from celery_hashbeat._logs import WEB
from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.refusals import AdminError

#: The actions, and what each needs in Django's permissions (docs/design.md §18).
ACTIONS = {"pause": "change", "resume": "change", "trigger": "trigger", "remove": "change"}


class UnknownActionError(AdminError):
    """A form asked for an action the console does not have."""


def act(admin: ScheduleAdmin, action: str, name: str, form: Mapping[str, str], who: str) -> str:
    """Do ``action`` on entry ``name`` and return the line the page shows; AdminError as
    ScheduleAdmin raises it when refused (nothing changed). The change is recorded in the
    store's audit trail as made for ``who``."""
    admin = admin.on_behalf_of(who)
    if action == "pause":
        reason = form.get("reason", "").strip()
        admin.pause(name, reason)
        done = f"paused {name}" + (f": {reason}" if reason else "")
    elif action == "resume":
        catch_up = form.get("catch_up") == "on"
        admin.resume(name, catch_up=catch_up)
        done = f"resumed {name} " + ("catching up as its policy says" if catch_up else "from now")
    elif action == "trigger":
        asked = admin.trigger(name, force=form.get("force") == "on")
        note = getattr(asked, "note", "")
        done = f"triggered {name}: task id {asked}" + (f" ({note})" if note else "")
    elif action == "remove":
        admin.remove(name)
        done = f"removed {name}"
    else:
        raise UnknownActionError(f"no action {action!r}; the console has {', '.join(ACTIONS)}")
    WEB.info("console: %s %s", who, done)
    return done
