"""The beat's HTTP endpoints (docs/design.md §14), served when ``hashbeat_http_port`` is set.

- ``/metrics``: Prometheus' text format;
- ``/livez``: 200 while the tick loop turns, 503 once it has not for a while (a deadlock, a call
  hung past every timeout): restarting the beat is then the fix. A store that is down does not
  fail it: restarting would not bring the store back;
- ``/readyz``: 200 while the store answers, 503 with the reason while it does not;
- ``/status``: JSON: role, leader, lease left, entries, store.

The server runs on threads of its own and only reads what the tick wrote (plain attributes): a
slow or stuck client, or a flood of them, never delays a tick, and a stuck tick never stops the
endpoints from saying so.
"""

from __future__ import annotations

import errno
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from celery_hashbeat._logs import HTTP
from celery_hashbeat.errors import HashbeatError
from celery_hashbeat.observe.watch import Watch

logger = HTTP

#: A client that sends nothing for this long is dropped (seconds).
CLIENT_TIMEOUT = 5.0


class PortInUse(HashbeatError):  # noqa: N818 - reads as what happened
    """The configured port cannot be listened on; the message names the setting and the fix."""


class HealthServer:
    """/metrics, /livez, /readyz and /status on ``host:port``, from a daemon thread."""

    def __init__(
        self, watch: Watch, host: str, port: int, status: Callable[[], dict[str, Any]]
    ) -> None:
        self.watch = watch
        self.status = status
        try:
            self._server = _Server((host, port), _Handler)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                problem = "the port is already in use by another process"
                fix = "stop that process, or set hashbeat_http_port to a free port"
            else:
                problem = exc.strerror or str(exc)
                fix = "check hashbeat_http_host and hashbeat_http_port"
            raise PortInUse(
                f"hashbeat_http_port: cannot listen on {host}:{port} ({problem}): {fix}"
            ) from None
        self._server.health = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.5},
            name="hashbeat-http",
            daemon=True,
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> HealthServer:
        self._thread.start()
        host, port = self.address
        logger.info(
            "beat: serving /metrics, /livez, /readyz and /status on http://%s:%d", host, port
        )
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def respond(self, path: str) -> tuple[int, str, bytes]:
        """(status code, content type, body) for a GET of ``path``."""
        route = path.partition("?")[0].rstrip("/") or "/"
        if route == "/metrics":
            metrics = self.watch.metrics
            if metrics is None:
                return 404, "text/plain", b"metrics are off\n"
            metrics.tick_age.set(self.watch.since_tick())
            return 200, CONTENT_TYPE_LATEST, metrics.exposition()
        if route in ("/livez", "/readyz"):
            ok, why = self.watch.live() if route == "/livez" else self.watch.ready()
            return (200 if ok else 503), "text/plain; charset=utf-8", f"{why}\n".encode()
        if route == "/status":
            body = json.dumps(self.status(), indent=2, sort_keys=True) + "\n"
            return 200, "application/json", body.encode()
        known = "/metrics, /livez, /readyz, /status"
        return 404, "text/plain", f"no such page {route}; try {known}\n".encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Refuse a port another process listens on, rather than share it (SO_REUSEPORT is off).
    allow_reuse_address = True
    health: HealthServer


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = CLIENT_TIMEOUT

    def do_GET(self) -> None:
        try:
            code, content_type, body = self.server.health.respond(self.path)
        except Exception as exc:  # a bug here must not take the endpoint down
            logger.exception("beat: the HTTP endpoint %s failed", self.path)
            code, content_type = 500, "text/plain"
            body = f"{type(exc).__name__}: {exc}\n".encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Probes come every few seconds: not worth a log line each."""
