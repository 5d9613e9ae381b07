"""The standalone console: a WSGI app on Werkzeug, its pages rendered with Jinja2 on the server
(docs/design.md §18). ``make_app(celery_app, token=...)`` gives the app for any WSGI server;
``hashbeat web`` serves it. Reading needs nothing; acting needs a login with the token, and every
form carries a CSRF token."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.utils import redirect
from werkzeug.wrappers import Request, Response

from celery_hashbeat.control.admin import ScheduleAdmin
from celery_hashbeat.control.refusals import AdminError
from celery_hashbeat.control.words import stamp as words_stamp
from celery_hashbeat.settings import Settings
from celery_hashbeat.store.errors import StoreError
from celery_hashbeat.web.actions import act
from celery_hashbeat.web.auth import CSRF_COOKIE, SESSION_COOKIE, SESSION_S, Guard
from celery_hashbeat.web.console import STATES, Console, PlanCache
from celery_hashbeat.web.forms import EntryForm
from celery_hashbeat.web.spread import svg

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment
    from celery import Celery

    from celery_hashbeat.store import Store

#: Where a request without the CSRF cookie keeps the browser id its response sets.
BROWSER_KEY = "hashbeat.browser"

#: Rows on one page of the entries list (the search and the state filter narrow it).
PAGE_ROWS = 200

#: Seconds between the entries page's refreshes of its table.
REFRESH_S = 10

ROUTES = Map(
    [
        Rule("/", endpoint="entries", methods=["GET"]),
        Rule("/entry", endpoint="entry", methods=["GET"]),
        Rule("/act", endpoint="act", methods=["POST"]),
        Rule("/new", endpoint="new", methods=["GET", "POST"]),
        Rule("/edit", endpoint="edit", methods=["GET", "POST"]),
        Rule("/login", endpoint="login", methods=["GET", "POST"]),
        Rule("/logout", endpoint="logout", methods=["POST"]),
    ]
)


def web_token(app: Celery) -> str | None:
    """The token actions need: the ``hashbeat_web_token`` setting, else HASHBEAT_WEB_TOKEN."""
    return Settings.from_conf(app.conf, warn=False).web_token or os.environ.get(
        "HASHBEAT_WEB_TOKEN"
    )


def templates() -> Environment:
    """The console's Jinja2 templates (package data), autoescaped, with its filters."""
    env = Environment(
        loader=PackageLoader("celery_hashbeat.web", "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["stamp"] = stamp
    env.filters["ago"] = ago
    return env


def stamp(ms: int | None) -> str:
    """An instant as the pages show it: as the commands' tables do, "-" for none."""
    return "-" if ms is None else words_stamp(ms)


def ago(ms: int | None, now_ms: int | None = None) -> str:
    """``in 3m`` or ``5s ago``: how far an instant is from now, in its largest unit."""
    if ms is None:
        return ""
    delta = (ms - (now_ms if now_ms is not None else int(time.time() * 1000))) / 1000
    size = abs(delta)
    for unit, seconds in (("d", 86400), ("h", 3600), ("m", 60)):
        if size >= seconds:
            text = f"{int(size // seconds)}{unit}"
            break
    else:
        text = f"{int(size)}s"
    return f"in {text}" if delta > 0 else f"{text} ago"


class ConsoleApp:
    """The WSGI app. One ScheduleAdmin serves every request, one at a time (a console is read
    by a few people, and some stores are not to be shared between threads)."""

    def __init__(
        self, celery_app: Celery, token: str | None = None, store: Store | None = None
    ) -> None:
        self.admin = ScheduleAdmin(celery_app, store)
        self.guard = Guard(token if token is not None else web_token(celery_app))
        self.env = templates()
        self._lock = threading.Lock()
        self.plans = PlanCache()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ)
        browser = request.cookies.get(CSRF_COOKIE)
        if not browser:  # this page's forms already carry the token of the cookie set below
            environ[BROWSER_KEY] = Guard.new_browser_id()
        try:
            endpoint, values = ROUTES.bind_to_environ(environ).match()
            if request.method == "POST" and not self.guard.csrf_ok(
                browser, request.form.get("csrf")
            ):
                response = self.refuse(
                    request,
                    "This form did not come from this console's page (its CSRF token is missing "
                    "or wrong): reload the page and send it again.",
                )
            else:
                with self._lock:
                    response = getattr(self, "on_" + endpoint)(request, **values)
        except HTTPException as exc:
            response = exc.get_response(environ)
        except StoreError as exc:
            why = str(exc).removesuffix("; will retry")
            response = self.render(
                request, "refused.html", status=503, why=f"The store did not answer: {why}"
            )
        if not browser:
            response.set_cookie(CSRF_COOKIE, environ[BROWSER_KEY], httponly=True, samesite="Strict")
        return response(environ, start_response)

    # Rendering --------------------------------------------------------------------------------

    def render(self, request: Request, template: str, status: int = 200, **values: Any) -> Response:
        browser = request.cookies.get(CSRF_COOKIE) or request.environ.get(BROWSER_KEY, "")
        html = self.env.get_template(template).render(
            csrf=self.guard.csrf_token(browser) if browser else "",
            can_act=self.guard.can_act,
            signed_in=self.guard.in_session(request.cookies.get(SESSION_COOKIE)),
            path=request.full_path,
            notice=request.args.get("notice", ""),
            **values,
        )
        return Response(html, status=status, mimetype="text/html")

    def refuse(self, request: Request, why: str) -> Response:
        return self.render(request, "refused.html", status=403, why=why)

    def signed_in(self, request: Request) -> bool:
        return self.guard.in_session(request.cookies.get(SESSION_COOKIE))

    def not_signed_in(self, request: Request) -> Response:
        if not self.guard.can_act:
            why = (
                "This console only reads: it was started without a token. Set "
                "hashbeat_web_token (or HASHBEAT_WEB_TOKEN) and restart it to act."
            )
        else:
            why = "Acting needs the console's token: log in first."
        return self.refuse(request, why)

    # Pages ------------------------------------------------------------------------------------

    def on_entries(self, request: Request) -> Response:
        state = request.args.get("state", "")
        search = request.args.get("q", "")
        console = Console(self.admin, self.plans)
        rows = console.rows(state if state in STATES else "", search)
        page = max(
            int(request.args.get("page", "1")) if request.args.get("page", "1").isdigit() else 1, 1
        )
        pages = max((len(rows) + PAGE_ROWS - 1) // PAGE_ROWS, 1)
        page = min(page, pages)
        template = "table.html" if request.args.get("fragment") else "entries.html"
        return self.render(
            request,
            template,
            rows=console.with_outcomes(rows[(page - 1) * PAGE_ROWS : page * PAGE_ROWS]),
            total=len(rows),
            page=page,
            pages=pages,
            overview=console.overview(),
            now=console.now_ms,
            state=state,
            q=search,
            states=STATES,
            refresh_s=REFRESH_S,
        )

    def on_entry(self, request: Request, error: str = "", status: int = 200) -> Response:
        name = request.args.get("name") or request.form.get("name", "")
        console = Console(self.admin, self.plans)
        found = console.entry(name)
        if found is None:
            raise NotFound(f"No entry {name!r} in beat_schedule or in the store.")
        row, view = found
        picture = console.spread(name)
        return self.render(
            request,
            "entry.html",
            status=status,
            row=row,
            view=view,
            history=console.history(name),
            audit=console.audit(name),
            spread=svg(picture, name),
            picture=picture,
            now=console.now_ms,
            error=error,
        )

    def on_act(self, request: Request) -> Response:
        if not self.signed_in(request):
            return self.not_signed_in(request)
        name = request.form.get("name", "")
        action = request.form.get("action", "")
        try:
            done = act(self.admin, action, name, request.form, who="console")
        except AdminError as exc:
            request.args = request.form  # the entry to show again
            return self.on_entry(request, error=f"{action}: {exc}", status=400)
        where = "/" if action == "remove" else "/entry?" + urlencode({"name": name})
        joiner = "&" if "?" in where else "?"
        return redirect(where + joiner + urlencode({"notice": done}), code=303)

    def on_new(self, request: Request) -> Response:
        return self._form(request, None)

    def on_edit(self, request: Request) -> Response:
        return self._form(request, request.args.get("name", ""))

    def _form(self, request: Request, editing: str | None) -> Response:
        if request.method == "POST" and not self.signed_in(request):
            return self.not_signed_in(request)
        form: EntryForm | None
        if request.method == "GET":
            form = EntryForm.blank() if editing is None else EntryForm.to_edit(self.admin, editing)
            if form is None:
                raise NotFound(f"No store entry {editing!r} to edit.")
        else:
            form = EntryForm.posted(request.form, editing)
            if form.save(self.admin, editing, who="console"):
                name = form.text("name")
                verb = "added" if editing is None else "updated"
                query = urlencode({"name": name, "notice": f"{verb} {name}"})
                return redirect("/entry?" + query, code=303)
        controls = form.controls(editing)
        status = 400 if form.errors else 200
        return self.render(
            request, "form.html", status, form=form, editing=editing, controls=controls
        )

    def on_login(self, request: Request) -> Response:
        back = request.values.get("next", "/")
        back = back if back.startswith("/") and not back.startswith("//") else "/"
        if request.method == "GET":
            return self.render(request, "login.html", back=back, error="")
        cookie = self.guard.login(request.form.get("token", ""))
        if cookie is None:
            error = (
                "That is not the console's token."
                if self.guard.can_act
                else ("This console has no token, so nobody can log in: set hashbeat_web_token.")
            )
            return self.render(request, "login.html", status=403, back=back, error=error)
        response = redirect(back, code=303)
        response.set_cookie(
            SESSION_COOKIE, cookie, max_age=SESSION_S, httponly=True, samesite="Strict"
        )
        return response

    def on_logout(self, request: Request) -> Response:
        response = redirect("/", code=303)
        response.delete_cookie(SESSION_COOKIE)
        return response


def make_app(
    celery_app: Celery, token: str | None = None, store: Store | None = None
) -> ConsoleApp:
    """The console for ``celery_app``'s schedule, as a WSGI app; ``token`` (default: the
    ``hashbeat_web_token`` setting, else HASHBEAT_WEB_TOKEN) is what acting needs."""
    return ConsoleApp(celery_app, token, store)
