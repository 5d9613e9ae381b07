""" "Hashbeat entries" in the Django admin: the console's list and entry page, and its actions
through ScheduleAdmin, each behind a Django permission; Django's admin_view adds the login and
CSRF checks. Who acted is the Django user (logged with the action)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from celery_hashbeat.contrib.django.console import LOCK, PLANS, row_words, schedule_admin
from celery_hashbeat.contrib.django.models import Entry
from celery_hashbeat.control.refusals import AdminError
from celery_hashbeat.web.actions import ACTIONS, act
from celery_hashbeat.web.app import stamp
from celery_hashbeat.web.console import STATES, Console
from celery_hashbeat.web.forms import EntryForm
from celery_hashbeat.web.spread import svg

#: Rows on one page of the list.
PAGE_ROWS = 200


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):  # type: ignore[misc]  # Django has no stubs here
    """The list and one entry's page, read from the store, never from a table."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        return [
            path("", wrap(self.changelist_view), name="hashbeat_entry_changelist"),
            path("entry/", wrap(self.entry_view), name="hashbeat_entry_detail"),
            path("act/", wrap(require_POST(self.act_view)), name="hashbeat_entry_act"),
            path("new/", wrap(self.new_view), name="hashbeat_entry_new"),
            path("edit/", wrap(self.edit_view), name="hashbeat_entry_edit"),
        ]

    def _context(self, request: HttpRequest, title: str) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            "can_change": self.has_change_permission(request),
            "can_trigger": request.user.has_perm("hashbeat.trigger_entry"),
        }

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        state = request.GET.get("state", "")
        search = request.GET.get("q", "")
        with LOCK:
            console = Console(schedule_admin(), PLANS)
            rows = console.rows(state if state in STATES else "", search)
            overview = console.overview()
            shown = [
                row_words(row, console.now_ms) for row in console.with_outcomes(rows[:PAGE_ROWS])
            ]
        context = {
            **self._context(request, "Hashbeat entries"),
            "rows": shown,
            "total": len(rows),
            "overview": overview,
            "lease_s": None if overview.leader is None else overview.leader.ttl_left_ms / 1000,
            "states": STATES,
            "state": state,
            "q": search,
        }
        return TemplateResponse(request, "hashbeat/change_list.html", context)

    def entry_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        name = request.GET.get("name", "")
        with LOCK:
            console = Console(schedule_admin(), PLANS)
            found = console.entry(name)
            if found is None:
                raise Http404(f"No entry {name!r} in beat_schedule or in the store.")
            row, view = found
            picture = console.spread(name)
            history = console.history(name)
            audit = console.audit(name)
        context = {
            **self._context(request, f"Hashbeat entry {name}"),
            "entry": row_words(row, console.now_ms),
            "view": view,
            "fields": [
                (key, json.dumps(value))
                for key, value in sorted(view.definition.items())
                if key != "schedule"
            ],
            "history": [{"when": stamp(record.at), "record": record} for record in history],
            "audit": [{"when": stamp(change.at_ms), "change": change} for change in audit],
            "spread": svg(picture, name),
            "picture": picture,
        }
        return TemplateResponse(request, "hashbeat/entry.html", context)

    def act_view(self, request: HttpRequest) -> HttpResponse:
        action = request.POST.get("action", "")
        name = request.POST.get("name", "")
        needs = ACTIONS.get(action)
        if needs is None or not request.user.has_perm(f"hashbeat.{needs}_entry"):
            raise PermissionDenied(f"{action}: you lack the permission hashbeat.{needs}_entry")
        try:
            with LOCK:
                done = act(schedule_admin(), action, name, request.POST.dict(), who_of(request))
        except AdminError as exc:
            messages.error(request, f"{action}: {exc}")
        else:
            messages.success(request, done)
        if action == "remove":
            return HttpResponseRedirect(reverse("admin:hashbeat_entry_changelist"))
        return to_entry(name)

    def new_view(self, request: HttpRequest) -> HttpResponse:
        return self._form(request, None)

    def edit_view(self, request: HttpRequest) -> HttpResponse:
        return self._form(request, request.GET.get("name", ""))

    def _form(self, request: HttpRequest, editing: str | None) -> HttpResponse:
        """Add or edit a store entry with the console's form (web/forms.py): the change
        permission, and a refusal beside its field."""
        if not self.has_change_permission(request):
            raise PermissionDenied
        status = 200
        form: EntryForm | None
        if request.method == "POST":
            form = EntryForm.posted(request.POST.dict(), editing)
            with LOCK:
                saved = form.save(schedule_admin(), editing, who_of(request))
            if saved:
                name = form.text("name")
                messages.success(request, f"{'added' if editing is None else 'updated'} {name}")
                return to_entry(name)
            status = 400
        elif editing is None:
            form = EntryForm.blank()
        else:
            with LOCK:
                form = EntryForm.to_edit(schedule_admin(), editing)
        if form is None:
            raise Http404(f"No store entry {editing!r} to edit.")
        title = "Add a hashbeat entry" if editing is None else f"Edit hashbeat entry {editing}"
        context = {
            **self._context(request, title),
            "form": form,
            "controls": form.controls(editing),
            "editing": editing,
        }
        return TemplateResponse(request, "hashbeat/form.html", context, status=status)


def who_of(request: HttpRequest) -> str:
    """Who acts, for the audit trail and the log: the Django user."""
    return f"django:{request.user.get_username()}"


def to_entry(name: str) -> HttpResponse:
    """A redirect to entry ``name``'s page."""
    target = reverse("admin:hashbeat_entry_detail")
    return HttpResponseRedirect(f"{target}?{urlencode({'name': name})}")
