"""The worker listener: plain TCP accept, TLS only for a complete ClientHello,
caps per stage (service/connection_caps.py), one deadline from accept.

Why not `loop.create_server(ssl=...)`: asyncio starts the TLS handshake on
accept and caps nothing, so connections that say nothing (or half a ClientHello)
hold slots and handshakes that a real worker then waits behind. Here:

1. The accept loop never waits: every connection is accepted into the hello
   waits (oldest closed at `max_hello_waits`), where it costs a socket and a
   timer until its first TLS record is complete (service/client_hello.py).
2. A complete ClientHello whose random or key share was seen before (a
   replay) is closed at once, before any TLS work.
3. A fresh one waits for a handshake turn: at most `max_handshakes` handshakes
   wait on the server's part at once. The turn ends with the server's first
   flight (ServerHello .. Finished: the CPU of a handshake); waiting for the
   client's reply holds none. Handshakes plus established connections at most
   `max_connections`, so the established connections are bounded too.
4. `handshake_timeout_s` runs from accept to an established connection, through
   1 to 3; a connection that has not made it by then is closed. Within it, from
   the turn on, each step has `handshake_step_timeout_s`: the server's flight,
   then the client's reply — a client that stalls after the server's flight is
   closed a step after it.
5. On the handshake's completion, before aiohttp sees the connection, the peer's
   certificate identity is counted: beyond `max_connections_per_worker` the
   connection is closed at once, with no HTTP answer (answering would mean
   holding the connection until a request arrives — the very slot the cap
   protects).

`reuse_port` binds with SO_REUSEPORT so that several processes share one port
(service/supervisor.py); the kernel spreads new connections over them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from asyncio import sslproto
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp.web_runner import BaseRunner, BaseSite

from qinglong.service.client_hello import hello_fingerprints, wait_for_client_hello
from qinglong.service.config import IngressConfig
from qinglong.service.connection_caps import (
    HandshakeTurns,
    HelloWaits,
    IdentityCounter,
    SeenHellos,
)
from qinglong.service.identity import worker_id_from_der
from qinglong.service.listener import envelope_handler_factory
from qinglong.service.metrics import IngressMetrics
from qinglong.service.tls import ServerTls

log = logging.getLogger("qinglong.ingress.listener")

# Requests are small (head lines <= 4 KiB, body <= 16 KiB): a 4 KiB read buffer
# costs nothing in throughput, where asyncio's 256 KiB one would cost ~130 MB
# for 512 connections.
TLS_READ_BUFFER_BYTES = 4 * 1024
# A certificate that names no worker: the application refuses its requests; its
# connections share one bucket of the per-identity cap.
NO_IDENTITY = ""
# ClientHello fingerprints remembered (a random and a key share each: ~8,000
# handshakes, ~2.5 MB).
SEEN_HELLO_FINGERPRINTS = 16384


class ReplayedHello(ConnectionError):
    """The ClientHello repeats the random or a key share of an earlier one."""


@dataclass(frozen=True)
class ListenerLimits:
    max_connections: int = 512
    max_handshakes: int = 64
    max_hello_waits: int = 1024
    max_connections_per_worker: int = 4
    handshake_timeout_s: float = 3.0
    backlog: int = 1024
    handshake_step_timeout_s: float = 1.0

    @classmethod
    def from_config(cls, config: IngressConfig) -> ListenerLimits:
        return cls(
            config.max_connections,
            config.max_handshakes,
            config.max_hello_waits,
            config.max_connections_per_worker,
            config.handshake_timeout_s,
            config.backlog,
            config.handshake_step_timeout_s,
        )


class _LeanTlsProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol with a small read buffer.

    Relies on a CPython internal: `asyncio.sslproto.SSLProtocol` is private and
    sizes its receive buffer (`__init__`, `get_buffer`) and its plaintext reads
    from the class attribute `max_size` (256 KiB in 3.11). No public API sets it.
    `tests/py/test_ingress_tls.py::test_lean_tls_protocol_still_sizes_its_buffer_by_max_size`
    fails if a Python upgrade drops or renames it, instead of the buffer silently
    growing back to 256 KiB per connection.
    """

    max_size = TLS_READ_BUFFER_BYTES
    # Called once, as the server's first flight is handed to the transport
    # (`_process_outgoing` during the handshake with bytes pending): the key
    # exchange and the signature are done. Same internals caveat as `max_size`;
    # `test_a_stalled_handshake_returns_its_turn_at_the_servers_flight` fails if
    # they change.
    on_server_flight: Callable[[], None] | None = None

    # typeshed leaves these SSLProtocol internals out: hence the attr-defined/misc ignores.
    def _process_outgoing(self) -> None:
        flight = self.on_server_flight
        if (
            flight is None
            or self._state is not sslproto.SSLProtocolState.DO_HANDSHAKE  # type: ignore[attr-defined]
            or not self._outgoing.pending  # type: ignore[attr-defined]
        ):
            super()._process_outgoing()  # type: ignore[misc]
            return
        self.on_server_flight = None
        super()._process_outgoing()  # type: ignore[misc]
        flight()


class _GuardedProtocol(asyncio.Protocol):
    """Sits between the TLS layer and aiohttp's handler: admits the connection
    (identity cap) before aiohttp sees it (the handler is only built then), and
    reports its end."""

    def __init__(
        self,
        factory: Callable[[], asyncio.Protocol],
        admit: Callable[[asyncio.BaseTransport, bool], str | None],
        closed: Callable[[str], None],
    ) -> None:
        self._factory = factory
        self._admit = admit
        self._closed = closed
        self._inner: asyncio.Protocol | None = None
        self.identity: str | None = None
        self.finished = False  # the handshake completed (admitted or refused)
        self.replying = False  # the server's flight is out: its turn has ended
        self.settled = False  # the listener is done with it (established or refused)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.finished = True
        self.identity = self._admit(transport, self.replying)
        if self.identity is None:
            transport.close()
            return
        self._inner = self._factory()
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._inner is not None:
            self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._inner is None or self.identity is None:
            return
        try:
            self._inner.connection_lost(exc)
        finally:
            self._closed(self.identity)


def _peer_identity(transport: asyncio.BaseTransport) -> str:
    ssl_object = transport.get_extra_info("ssl_object")
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    return (worker_id_from_der(der) if der else None) or NO_IDENTITY


class TlsAcceptLoop:
    """The `asyncio.AbstractServer`-like object BaseSite.stop() closes."""

    def __init__(
        self,
        sock: socket.socket,
        factory: Callable[[], asyncio.Protocol],
        tls: ServerTls,
        limits: ListenerLimits,
        metrics: IngressMetrics,
    ) -> None:
        self._sock = sock
        self._factory = factory
        self._tls = tls
        self._limits = limits
        self._metrics = metrics
        self.turns = HandshakeTurns(limits.max_handshakes, limits.max_connections)
        self.identities = IdentityCounter(limits.max_connections_per_worker)
        self.hello_waits = HelloWaits(limits.max_hello_waits)
        self.seen_hellos = SeenHellos(SEEN_HELLO_FINGERPRINTS)
        self._evicted: set[asyncio.Task[None]] = set()
        self._pending: set[asyncio.Task[None]] = set()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as exc:
                # EMFILE/ENFILE/ECONNABORTED: back off briefly instead of spinning.
                log.warning(
                    "accept failed",
                    extra={"event": "listener.accept_failed", "error": type(exc).__name__},
                )
                await asyncio.sleep(0.1)
                continue
            oldest = self.hello_waits.make_room()
            if isinstance(oldest, asyncio.Task):
                self._evicted.add(oldest)
                oldest.cancel()
            task = loop.create_task(self._establish(conn))
            self.hello_waits.add(task)
            self._pending.add(task)
            task.add_done_callback(functools.partial(self._finished, conn))

    def _finished(self, conn: socket.socket, task: asyncio.Task[None]) -> None:
        self._pending.discard(task)
        if not task.cancelled():
            return
        # Cancelled before its first step (evicted in the same loop iteration it
        # was accepted, or at shutdown): `_establish` never ran, the socket is ours.
        self.hello_waits.discard(task)
        if task in self._evicted:
            self._evicted.discard(task)
            self._metrics.connections_shed.inc("hello_evicted")
        conn.close()

    async def _establish(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        guard = _GuardedProtocol(self._factory, self._admit, self._closed)
        transport: asyncio.Transport | None = None
        turn = False
        try:
            async with asyncio.timeout(self._limits.handshake_timeout_s) as deadline:
                hello = await wait_for_client_hello(loop, conn)
                if not self.seen_hellos.first_sight(hello_fingerprints(hello)):
                    raise ReplayedHello("a replayed ClientHello")
                await self.turns.acquire()
                turn = True
                self.hello_waits.discard(task)
                step = _StepDeadline(loop, deadline, self._limits.handshake_step_timeout_s)
                step.next()  # the server's flight

                def server_flight_sent() -> None:
                    if guard.finished or guard.settled:  # its turn already ended
                        return
                    guard.replying = True
                    self.turns.server_flight_sent()
                    step.next()  # the client's reply

                transport = await self._handshake(loop, conn, guard, server_flight_sent)
            if not guard.finished:  # closed during the handshake without an error
                raise ConnectionResetError("connection lost during the TLS handshake")
        except BaseException as exc:
            self._refused(conn, transport, task, exc)
            if isinstance(exc, asyncio.CancelledError) and task not in self._evicted:
                raise
        finally:
            guard.settled = True
            self._evicted.discard(task)
            self.hello_waits.discard(task)
            if turn and not guard.finished:  # _admit ends the turn of a finished one
                self.turns.handshake_done(established=False, replying=guard.replying)

    async def _handshake(
        self,
        loop: asyncio.AbstractEventLoop,
        conn: socket.socket,
        guard: _GuardedProtocol,
        server_flight_sent: Callable[[], None],
    ) -> asyncio.Transport:
        done: asyncio.Future[None] = loop.create_future()
        context = self._tls.context  # read per handshake: SIGHUP swaps it

        def protocol() -> _LeanTlsProtocol:
            # typeshed says int; asyncio takes any number of seconds.
            timeout_s = self._limits.handshake_timeout_s
            made = _LeanTlsProtocol(
                loop,
                guard,
                context,
                done,
                server_side=True,
                ssl_handshake_timeout=timeout_s,  # type: ignore[arg-type]
            )
            made.on_server_flight = server_flight_sent
            return made

        transport, _ = await loop.connect_accepted_socket(protocol, conn)
        try:
            await done
        except BaseException:
            transport.abort()
            raise
        return transport

    def _admit(self, transport: asyncio.BaseTransport, replying: bool) -> str | None:
        """Runs as the handshake completes: the identity, or None if over its cap."""
        ssl_object = transport.get_extra_info("ssl_object")
        reused = ssl_object is not None and ssl_object.session_reused
        self._metrics.tls_handshakes.inc("resumed" if reused else "full")
        identity = _peer_identity(transport)
        admitted = self.identities.acquire(identity)
        self.turns.handshake_done(established=admitted, replying=replying)
        if admitted:
            return identity
        self._metrics.connections_shed.inc("identity_cap")
        log.warning(
            "connection closed: its certificate identity holds the most connections allowed",
            extra={
                "event": "listener.identity_cap",
                "limit": self._limits.max_connections_per_worker,
            },
        )
        return None

    def _closed(self, identity: str) -> None:
        self.identities.release(identity)
        self.turns.connection_closed()

    def _refused(
        self,
        conn: socket.socket,
        transport: asyncio.Transport | None,
        task: asyncio.Task[None],
        exc: BaseException,
    ) -> None:
        # Plaintext, TLS 1.2, missing/untrusted/expired client certificates, the
        # deadline and eviction all end here, before aiohttp sees the connection.
        # Counted before the close, so a peer that sees the close sees the count.
        self._count_refusal(task, exc)
        if transport is not None:
            transport.abort()
        conn.close()

    def _count_refusal(self, task: asyncio.Task[None], exc: BaseException) -> None:
        if task in self._evicted:
            task.uncancel()
            self._metrics.connections_shed.inc("hello_evicted")
            return
        if isinstance(exc, ReplayedHello):
            # Not logged: a flood of replays would be a flood of log lines.
            self._metrics.connections_shed.inc("replayed_hello")
            return
        if isinstance(exc, asyncio.CancelledError):
            return  # shutting down
        if isinstance(exc, TimeoutError):
            self._metrics.connections_shed.inc("deadline")
        self._metrics.connections_refused.inc()
        self._metrics.tls_handshakes.inc("failed")
        log.info(
            "tls handshake refused",
            extra={"event": "tls.handshake_refused", "error": type(exc).__name__},
        )

    @property
    def open_connections(self) -> int:
        return self.turns.established

    def close(self) -> None:
        self._task.cancel()
        for task in list(self._pending):
            task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        try:
            await self._task
        except asyncio.CancelledError:
            pass


class _StepDeadline:
    """Moves a handshake's deadline to `step_s` from now at each step, never past
    the deadline it started with (`handshake_timeout_s` from accept)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, deadline: asyncio.Timeout, step_s: float
    ) -> None:
        self._loop = loop
        self._deadline = deadline
        self._final = deadline.when()
        self._step_s = step_s

    def next(self) -> None:
        if self._deadline.expired():
            return
        end = self._loop.time() + self._step_s
        self._deadline.reschedule(end if self._final is None else min(end, self._final))


def listening_socket(host: str, port: int, backlog: int, *, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=backlog, reuse_port=reuse_port)
    sock.setblocking(False)
    return sock


class TlsSite(BaseSite):
    """Like `web.TCPSite(..., ssl_context=...)` with the caps described above."""

    def __init__(
        self,
        runner: BaseRunner,
        host: str,
        port: int,
        *,
        tls: ServerTls,
        limits: ListenerLimits,
        metrics: IngressMetrics,
        reuse_port: bool = False,
    ) -> None:
        super().__init__(runner, ssl_context=tls.context, backlog=limits.backlog)
        self._host = host
        self._port = port
        self._tls = tls
        self._limits = limits
        self._metrics = metrics
        self._reuse_port = reuse_port
        self._bound_port: int | None = None
        self.accept_loop: TlsAcceptLoop | None = None

    @property
    def port(self) -> int:
        return self._bound_port if self._bound_port is not None else self._port

    @property
    def name(self) -> str:
        return f"https://{self._host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        sock = listening_socket(
            self._host, self._port, self._limits.backlog, reuse_port=self._reuse_port
        )
        self._bound_port = int(sock.getsockname()[1])
        self.accept_loop = TlsAcceptLoop(
            sock, envelope_handler_factory(server), self._tls, self._limits, self._metrics
        )
        self._server = self.accept_loop  # type: ignore[assignment]
        self._metrics.add_gauge(
            "qinglong_ingress_open_connections",
            "Established TLS connections (limit maxConnections).",
            lambda: float(self._loop_value("established")),
        )
        self._metrics.add_gauge(
            "qinglong_ingress_tls_handshakes_in_progress",
            "TLS handshakes running: waiting on the server (limit "
            "maxHandshakes) or on the client's reply.",
            lambda: float(self._loop_value("handshaking") + self._loop_value("replying")),
        )
        self._metrics.add_gauge(
            "qinglong_ingress_hello_waits",
            "Accepted connections whose ClientHello is incomplete or "
            "waiting for a handshake turn (limit maxHelloWaits).",
            lambda: float(self._loop_value("hello_waits")),
        )

    def _loop_value(self, name: str) -> int:
        loop = self.accept_loop
        if loop is None:
            return 0
        if name == "hello_waits":
            return len(loop.hello_waits)
        return int(getattr(loop.turns, name))

    async def stop(self) -> None:
        await super().stop()
        if self.accept_loop is not None:
            await self.accept_loop.wait_closed()
