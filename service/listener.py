"""A TLS listening site that really bounds concurrent connections.

`TCPSite` hands every accepted socket to asyncio, so nothing caps how many TLS
handshakes and connections are alive at once. Here an accept loop takes a slot
from a semaphore *before* `accept()`: at the limit the loop stops accepting,
new clients wait in the kernel backlog (`backlog`) and beyond that are refused
by the kernel. A slot is returned when the handshake fails or times out
(`handshake_timeout_s`) or when an established connection is lost, so handshakes
in progress count against the limit too.

Memory per connection is kept small, because under a slowloris it is multiplied
by the connection limit: a client that connects and says nothing costs a socket
and a timer (no TLS state exists until its ClientHello arrives), and a TLS
connection reads through a 4 KiB buffer instead of asyncio's 256 KiB one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from asyncio import sslproto
from collections.abc import Callable

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest
from aiohttp.web_runner import BaseRunner, BaseSite

from qinglong.service.errors import error_response
from qinglong.service.metrics import IngressMetrics

log = logging.getLogger("qinglong.ingress.listener")


class _Slot:
    """One connection's claim on the semaphore, released exactly once."""

    __slots__ = ("_released", "_sem")

    def __init__(self, sem: asyncio.Semaphore) -> None:
        self._sem = sem
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._sem.release()


class _SlotProtocol(asyncio.Protocol):
    """Delegates to aiohttp's request handler and frees the slot on close."""

    def __init__(self, inner: asyncio.Protocol, slot: _Slot) -> None:
        self._inner = inner
        self._slot = slot
        self.made = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.made = True
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self._inner.connection_lost(exc)
        finally:
            self._slot.release()


# The receive buffer only bounds one read: a TLS record larger than it is simply
# assembled over several reads, never refused. Requests here are small (head
# lines <= 4 KiB, body <= 4 KiB), so 4 KiB costs nothing in throughput.
TLS_READ_BUFFER_BYTES = 4 * 1024


class _LeanTlsProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a 4 KiB receive buffer: the stock one
    preallocates 256 KiB per connection, i.e. ~130 MB for 512 idle handshakes."""

    max_size = TLS_READ_BUFFER_BYTES


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    """Wait until the peer sent something (or closed), without reading it."""
    ready: asyncio.Future[None] = loop.create_future()
    fd = sock.fileno()
    loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(fd)


class EnvelopeRequestHandler(RequestHandler):
    """aiohttp answers unparseable HTTP (bad request line, oversized header) from
    the protocol, outside every middleware, with a text page; this answers with
    the `qinglong/error@v1` envelope instead."""

    __slots__ = ()

    def handle_error(self, request: BaseRequest, status: int = 500,
                     exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if request.writer.output_size > 0:
            raise ConnectionError("response already started")
        log.info("malformed http request", extra={"event": "http.malformed",
                                                  "status": status})
        reason = "malformed_http" if status < 500 else "internal_error"
        return error_response(status, reason, close_connection=True)


def envelope_handler_factory(server: web.Server) -> Callable[[], asyncio.Protocol]:
    """Like `server()` but building `EnvelopeRequestHandler`s with the same settings.
    (web.Server has no public hook for the handler class, hence `_kwargs`.)"""
    kwargs = dict(getattr(server, "_kwargs", {}))

    def factory() -> asyncio.Protocol:
        return EnvelopeRequestHandler(server, loop=asyncio.get_running_loop(), **kwargs)

    return factory


class _AcceptLoop:
    """The `asyncio.AbstractServer`-like object BaseSite.stop() closes."""

    def __init__(self, sock: socket.socket, factory: Callable[[], asyncio.Protocol],
                 ssl_context: ssl.SSLContext, max_connections: int,
                 handshake_timeout_s: float, metrics: IngressMetrics | None) -> None:
        self._sock = sock
        self._factory = factory
        self._ssl = ssl_context
        self._max = max_connections
        self._sem = asyncio.Semaphore(max_connections)
        self._handshake_timeout_s = handshake_timeout_s
        self._metrics = metrics
        self._pending: set[asyncio.Task[None]] = set()
        self._task = asyncio.get_running_loop().create_task(self._run())

    @property
    def open_connections(self) -> int:
        """Connections holding a slot (handshaking or established)."""
        return self._max - self._sem._value  # asyncio has no public getter

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._sem.acquire()
            slot = _Slot(self._sem)
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except asyncio.CancelledError:
                slot.release()
                raise
            except OSError as exc:
                # EMFILE/ENFILE/ECONNABORTED: back off briefly instead of spinning.
                slot.release()
                log.warning("accept failed", extra={"event": "listener.accept_failed",
                                                    "error": type(exc).__name__})
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._establish(conn, slot))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _establish(self, conn: socket.socket, slot: _Slot) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        transport: asyncio.BaseTransport | None = None
        try:
            # Nothing TLS is allocated for a peer that has not sent its ClientHello.
            await asyncio.wait_for(_readable(loop, conn), self._handshake_timeout_s)
            remaining = max(0.001, self._handshake_timeout_s - (loop.time() - started))
            handshake: asyncio.Future[None] = loop.create_future()
            app = _SlotProtocol(self._factory(), slot)
            transport, _ = await loop.connect_accepted_socket(
                lambda: _LeanTlsProtocol(loop, app, self._ssl, handshake, server_side=True,
                                         ssl_handshake_timeout=remaining), conn)
            await handshake
            if not app.made:  # closed during the handshake without an error
                raise ConnectionResetError("connection lost during the TLS handshake")
            if self._metrics is not None:
                # One attribute read per connection (not per request); tickets are off
                # today (service/tls.py), so every success is "full".
                ssl_object = transport.get_extra_info("ssl_object")
                reused = ssl_object is not None and ssl_object.session_reused
                self._metrics.tls_handshakes.inc("resumed" if reused else "full")
        except BaseException as exc:
            # Plaintext, TLS 1.2, missing/untrusted/expired client certificates and
            # handshake timeouts all end here, before aiohttp sees the connection.
            if transport is not None:
                transport.abort()
            conn.close()
            slot.release()
            if self._metrics is not None:
                self._metrics.connections_refused.inc()
                self._metrics.tls_handshakes.inc("failed")
            if isinstance(exc, asyncio.CancelledError):
                raise
            log.info("tls handshake refused", extra={"event": "tls.handshake_refused",
                                                     "error": type(exc).__name__})

    def close(self) -> None:
        self._task.cancel()
        for task in list(self._pending):
            task.cancel()
        with contextlib.suppress(OSError):
            self._sock.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def _listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=backlog,
                                reuse_port=False)
    sock.setblocking(False)
    return sock


class BoundedTlsSite(BaseSite):
    """Like `web.TCPSite(..., ssl_context=...)` plus a hard connection limit."""

    def __init__(self, runner: BaseRunner, host: str, port: int, *,
                 ssl_context: ssl.SSLContext, backlog: int = 128, max_connections: int = 512,
                 handshake_timeout_s: float = 10.0,
                 metrics: IngressMetrics | None = None) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host = host
        self._port = port
        self._bound_port: int | None = None
        self._max_connections = max_connections
        self._handshake_timeout_s = handshake_timeout_s
        self._metrics = metrics
        self._loop_server: _AcceptLoop | None = None

    @property
    def port(self) -> int:
        return self._bound_port if self._bound_port is not None else self._port

    @property
    def name(self) -> str:
        return f"https://{self._host}:{self.port}"

    @property
    def open_connections(self) -> int:
        return self._loop_server.open_connections if self._loop_server else 0

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None and self._ssl_context is not None
        sock = _listening_socket(self._host, self._port, self._backlog)
        self._bound_port = int(sock.getsockname()[1])
        self._loop_server = _AcceptLoop(sock, envelope_handler_factory(server), self._ssl_context,
                                        self._max_connections, self._handshake_timeout_s,
                                        self._metrics)
        self._server = self._loop_server  # type: ignore[assignment]

    async def stop(self) -> None:
        await super().stop()
        if self._loop_server is not None:
            await self._loop_server.wait_closed()


def runner_kwargs(header_timeout_s: float, shutdown_timeout_s: float) -> dict[str, object]:
    """AppRunner/RequestHandler settings: the keep-alive timer also starts when a
    connection opens, so it is the deadline for a complete request head."""
    return {
        "access_log": None,
        "keepalive_timeout": header_timeout_s,
        "shutdown_timeout": shutdown_timeout_s,
        "max_line_size": 4096,
        "max_field_size": 4096,
        "max_headers": 32,
        # After an early 413 the unread body is drained for at most this long (so
        # the client can still read the answer), then the connection is closed.
        "lingering_time": 2.0,
    }

