"""A WSGI app served by waitress on a thread, for the tests and benchmarks that ask it over HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import waitress
from waitress import wasyncore


@contextmanager
def served(wsgi_app: Any) -> Iterator[str]:
    """``wsgi_app`` served by waitress on a free loopback port; yields its base URL.

    On the way out every socket is closed on the server's own thread, the clients' kept-alive
    connections too: a socket closed under the loop's ``select`` breaks it (a traceback from
    its thread), and the loop serves open connections until their clients hang up."""
    sockets: dict[int, Any] = {}
    server = waitress.create_server(wsgi_app, map=sockets, host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        server.task_dispatcher.shutdown()  # its threads finish before their sockets close
        server.trigger.pull_trigger(lambda: wasyncore.close_all(sockets))
        thread.join(timeout=5)
        assert not thread.is_alive(), "the server did not stop"
