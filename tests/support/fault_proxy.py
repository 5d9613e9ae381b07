"""A TCP proxy on the loopback that injects the network faults a broker or store meets for real.

It sits between the beats and a real server and can, at any moment: pass traffic through; delay
every reply by some seconds (a slow network); refuse connections and cut the open ones (a server
that is down: connects fail at once); hang (connections stay open, nothing moves, like a frozen
server or a black-holed route); or swallow replies (requests reach the server and run there, the
answers never come back: a lost reply). Threads only, bounded by the test that owns it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass

from tests.support.redis_server import free_port

PASS = "pass"
DELAY = "delay"
REFUSE = "refuse"
HANG = "hang"
SWALLOW = "swallow"

CHUNK = 65536


@dataclass
class _Link:
    client: socket.socket
    server: socket.socket

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


class FaultProxy:
    """Listens on 127.0.0.1:``port`` and forwards to 127.0.0.1:``target``."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self.mode = PASS
        self.delay = 0.0
        self.connections = 0
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    def url(self, scheme: str = "redis", path: str = "/0") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def start(self) -> FaultProxy:
        self._listen()
        return self

    def stop(self) -> None:
        self._closed.set()
        self._unlisten()
        self._cut()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # Modes

    def passing(self) -> None:
        self.mode = PASS
        self._listen()

    def delaying(self, seconds: float) -> None:
        """Hold every server-to-client chunk for ``seconds`` before passing it on."""
        self.delay = seconds
        self.mode = DELAY
        self._listen()

    def refusing(self) -> None:
        """Close the port and cut every connection: connects fail at once, as to a dead host."""
        self.mode = REFUSE
        self._unlisten()
        self._cut()

    def hanging(self) -> None:
        """Accept and keep connections, but move no byte in either direction."""
        self.mode = HANG
        self._listen()

    def swallowing(self) -> None:
        """Pass requests to the server, drop its replies."""
        self.mode = SWALLOW
        self._listen()

    # Plumbing

    def _listen(self) -> None:
        with self._lock:
            if self._listener is not None or self._closed.is_set():
                return
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(128)
            self._listener = listener
            self._acceptor = threading.Thread(
                target=self._accept, args=(listener,), name="proxy-accept", daemon=True
            )
            self._acceptor.start()

    def _unlisten(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()

    def _cut(self) -> None:
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            link = _Link(client, server)
            with self._lock:
                self._links.append(link)
                self.connections += 1
            for source, sink, upstream in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pump, args=(link, source, sink, upstream), daemon=True
                ).start()

    def _pump(
        self, link: _Link, source: socket.socket, sink: socket.socket, upstream: bool
    ) -> None:
        try:
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                while self.mode == HANG and not self._closed.is_set():
                    time.sleep(0.01)
                if not upstream and self.mode == SWALLOW:
                    continue
                if not upstream and self.mode == DELAY:
                    time.sleep(self.delay)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            link.close()
