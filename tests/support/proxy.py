"""A TCP fault proxy on the loopback, between the beats and a real redis-server.

Faults a broker or store meets in production, switchable while the beats run: pass-through; a
slow network (every server reply held back by some seconds); a dead server (the port refuses and
open connections are reset, so connects fail at once); a hung server (connections are accepted and
kept, nothing moves, like a SIGSTOPped redis-server); and lost replies (the request reaches the
server and runs there, the reply never comes back), for every connection during a window or for
the one request that carries a given marker. It runs an asyncio loop on a daemon thread of the
test process and stops with the test (use it as a context manager).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tests.support.redis_server import free_port

T = TypeVar("T")

PASS = "pass"
DELAY = "delay"
REFUSE = "refuse"
HANG = "hang"
SWALLOW = "swallow"

CHUNK = 1 << 16
#: Connections beyond this are closed at once: the proxy's memory stays bounded.
MAX_CONNECTIONS = 256


@dataclass
class ProxyStats:
    """What the proxy did, so a test can assert that its fault really happened."""

    accepted: int = 0
    refused_resets: int = 0
    dropped_bytes: int = 0
    #: Monotonic time when a ``swallow_reply_to`` marker was seen, and the request carrying it.
    triggered_at: float | None = None
    trigger_request: bytes = b""
    modes: list[tuple[float, str]] = field(default_factory=list)


@dataclass(eq=False)
class _Link:
    """One client connection and its upstream connection to the server."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    #: Until this monotonic time, replies on this link are dropped (a lost reply).
    swallow_until: float = 0.0
    tasks: list[asyncio.Task[None]] = field(default_factory=list)


class FaultProxy:
    """Listens on 127.0.0.1:``port`` and forwards every connection to 127.0.0.1:``target``."""

    def __init__(self, target: int, port: int | None = None) -> None:
        self.target = target
        self.port = port or free_port()
        self.stats = ProxyStats()
        self._mode = PASS
        self._delay = 0.0
        self._swallow_until = 0.0
        self._marker: bytes | None = None
        self._marker_window = 0.0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy")
        self._thread.daemon = True
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._changed: asyncio.Event | None = None

    # Lifecycle

    def start(self) -> FaultProxy:
        self._thread.start()
        self._call(self._init)
        self._call(self._listen)
        return self

    def close(self) -> None:
        """Stop listening, cut every connection and end the loop's thread."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def url(self, query: str = "") -> str:
        """A redis URL (db 0) that goes through the proxy; ``query`` without the ``?``."""
        return f"redis://127.0.0.1:{self.port}/0" + (f"?{query}" if query else "")

    @property
    def mode(self) -> str:
        return self._mode

    # Faults (each returns once the proxy acts on it)

    def pass_through(self) -> None:
        self._set(PASS)

    def delay(self, seconds: float) -> None:
        """Deliver every server-to-client byte ``seconds`` after the server sent it."""
        self._delay = seconds
        self._set(DELAY)

    def refuse(self) -> None:
        """Close the port and reset every open connection: connects fail at once."""
        self._set(REFUSE)

    def hang(self) -> None:
        """Accept and keep connections but move no byte either way until the mode changes; what
        was sent meanwhile is delivered afterwards, as a resumed server would read it."""
        self._set(HANG)

    def swallow(self, seconds: float) -> None:
        """Drop every reply the server sends in the next ``seconds``, then pass through."""
        self._swallow_until = time.monotonic() + seconds
        self._set(SWALLOW)

    def swallow_reply_to(self, marker: bytes, seconds: float) -> None:
        """Arm a one-shot lost reply: the first request containing ``marker`` reaches the server,
        and that connection's replies are dropped for ``seconds`` from then. Pass-through
        otherwise."""
        self.stats.triggered_at = None
        self.stats.trigger_request = b""
        self._marker, self._marker_window = marker, seconds
        self._set(PASS)

    def wait_triggered(self, timeout: float) -> bool:
        """Whether the armed marker was seen within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.stats.triggered_at is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.stats.triggered_at is not None

    # Plumbing (runs on the loop's thread)

    def _call(self, make: Callable[[], Coroutine[Any, Any, T]], timeout: float = 5.0) -> T:
        return asyncio.run_coroutine_threadsafe(make(), self._loop).result(timeout)

    def _set(self, mode: str) -> None:
        self.stats.modes.append((time.time(), mode))
        self._call(lambda: self._switch(mode))

    async def _init(self) -> None:
        self._changed = asyncio.Event()

    async def _switch(self, mode: str) -> None:
        self._mode = mode
        if mode == REFUSE:
            await self._unlisten()
            for link in list(self._links):
                self._reset(link)
                self.stats.refused_resets += 1
        else:
            await self._listen()
        assert self._changed is not None
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()  # wakes whatever waits on the old mode

    async def _listen(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(
                self._accept, "127.0.0.1", self.port, reuse_address=True, limit=CHUNK
            )

    async def _unlisten(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _shutdown(self) -> None:
        await self._unlisten()
        links = list(self._links)
        tasks = [task for link in links for task in link.tasks]
        for link in links:
            self._reset(link)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2)

    def _reset(self, link: _Link) -> None:
        """Close both sides with an RST, as a dead host's kernel would answer."""
        for writer in (link.client, link.server):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        self._links.discard(link)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._mode == REFUSE or len(self._links) >= MAX_CONNECTIONS:
            writer.transport.abort()
            return
        self.stats.accepted += 1
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.target, limit=CHUNK), 5
            )
        except (OSError, asyncio.TimeoutError):  # not TimeoutError before 3.11
            writer.transport.abort()
            return
        link = _Link(writer, up_writer)
        self._links.add(link)
        replies: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        link.tasks = [
            asyncio.ensure_future(self._requests(link, reader, up_writer)),
            asyncio.ensure_future(self._replies(link, up_reader, replies)),
            asyncio.ensure_future(self._deliver(replies, writer)),
        ]
        await asyncio.gather(*link.tasks, return_exceptions=True)
        self._links.discard(link)
        for side in (writer, up_writer):
            side.transport.abort()

    async def _while_hung(self) -> None:
        while self._mode == HANG:
            assert self._changed is not None
            await self._changed.wait()

    async def _requests(
        self, link: _Link, reader: asyncio.StreamReader, server: asyncio.StreamWriter
    ) -> None:
        """Client to server: held while hung, otherwise forwarded at once (a request is never
        delayed or lost: the faults here are on the way back). What a client sent before it
        went away still reaches the server, as bytes in a frozen server's socket buffer do."""
        with contextlib.suppress(OSError, RuntimeError):
            while data := await reader.read(CHUNK):
                await self._while_hung()
                marker = self._marker
                if marker is not None and marker in data:
                    self._marker = None
                    link.swallow_until = time.monotonic() + self._marker_window
                    self.stats.trigger_request = data[:2000]
                    self.stats.triggered_at = time.monotonic()
                server.write(data)
                await server.drain()
            await self._while_hung()
            if server.can_write_eof():
                server.write_eof()

    async def _replies(
        self, link: _Link, reader: asyncio.StreamReader, replies: asyncio.Queue[tuple[float, bytes]]
    ) -> None:
        """Server to client: dropped while swallowing, else stamped with their delivery time."""
        try:
            while data := await reader.read(CHUNK):
                await self._while_hung()
                now = time.monotonic()
                if now < link.swallow_until or (
                    self._mode == SWALLOW and now < self._swallow_until
                ):
                    self.stats.dropped_bytes += len(data)
                    continue
                delay = self._delay if self._mode == DELAY else 0.0
                replies.put_nowait((now + delay, data))
        except OSError:
            pass
        finally:
            replies.put_nowait((0.0, b""))

    async def _deliver(
        self, replies: asyncio.Queue[tuple[float, bytes]], client: asyncio.StreamWriter
    ) -> None:
        """Hands replies to the client in order, each at its delivery time; closes the client's
        side once the server closed its own."""
        with contextlib.suppress(OSError, RuntimeError):
            while True:
                due, data = await replies.get()
                if not data:
                    break
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                await self._while_hung()
                client.write(data)
                await client.drain()
            client.close()
