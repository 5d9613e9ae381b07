"""Serving the console: waitress, a pure-Python production WSGI server with a pool of threads
(wsgiref is a single-threaded reference server; Werkzeug's own is for development), and the rule
that a console reachable from elsewhere must have a token (docs/design.md §18)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

import waitress

from celery_hashbeat.errors import HashbeatError

if TYPE_CHECKING:
    from celery_hashbeat.web.app import ConsoleApp

#: Threads serving requests (the console takes one request at a time through the store).
THREADS = 4


class ExposedWithoutTokenError(ValueError, HashbeatError):
    """Asked to listen beyond this machine with no token: refused, since anyone who reaches it
    could then read the schedule, and nobody could act."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, has_token: bool) -> None:
    if not has_token and not is_loopback(host):
        raise ExposedWithoutTokenError(
            f"refusing to listen on {host}, beyond this machine, without a token: set "
            f"hashbeat_web_token (or HASHBEAT_WEB_TOKEN) so that acting needs it, or listen on "
            f"127.0.0.1 (the default) and reach it through an SSH tunnel or a proxy"
        )


def serve(app: ConsoleApp, host: str, port: int) -> None:
    """Serve ``app`` until interrupted (after ``check_bind``)."""
    check_bind(host, app.guard.can_act)
    server = waitress.create_server(app, host=host, port=port, threads=THREADS)
    print(f"hashbeat console on http://{host}:{server.effective_port}/ (Ctrl-C stops it)")
    server.run()
