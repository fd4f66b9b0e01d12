"""A TCP proxy in front of the ingress replicas, with two fault modes.

Round-robin: each new client connection goes to the next upstream; an upstream
that refuses the connection (killed, restarting) is skipped, as a TCP load
balancer with a connect-time health check would do.

Faults (the traffic is TLS, so the proxy only sees directions and sizes):

* **response drop** — with probability `drop_probability` per request, the
  request is forwarded and, when the upstream's answer arrives, the answer is
  discarded and both sides are closed: the ingress did the work (a lease may
  be committed), the worker never hears of it and must replay the same offer
  id. A "request" is a client->server burst after the connection has carried
  two client bursts already (ClientHello, then the client's Finished): from the
  third burst on, every client burst on a keep-alive connection is a request.
* **latency** — while `latency_s` > 0, every server->client chunk waits that
  long before it is forwarded (the 2 s spikes of the soak).
"""

from __future__ import annotations

import contextlib
import random
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

CONNECT_TIMEOUT_S = 1.0
# Bursts before the first request: ClientHello, then the client's Finished.
HANDSHAKE_BURSTS = 2
# Smaller server chunks are TLS alerts / tickets, not an HTTP response.
MIN_RESPONSE_BYTES = 100
CHUNK = 65536

__all__ = ["ChaosProxy", "ProxyStats"]


@dataclass
class ProxyStats:
    connections: int = 0
    upstream_refused: int = 0
    dropped_responses: int = 0
    delayed_chunks: int = 0


class ChaosProxy:
    def __init__(self, upstreams: list[int], *, rng: random.Random | None = None,
                 on_drop: Callable[[int], None] | None = None) -> None:  # fmt: skip
        self.upstreams = list(upstreams)
        self.drop_probability = 0.0
        self.latency_s = 0.0
        self.stats = ProxyStats()
        self._rng = rng or random.Random()
        self._on_drop = on_drop
        self._next = 0
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self._listener.settimeout(0.5)
        self.port = int(self._listener.getsockname()[1])
        self._thread = threading.Thread(target=self._accept_loop, name="chaos-proxy",
                                        daemon=True)  # fmt: skip

    def start(self) -> ChaosProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            open_sockets, self._sockets = list(self._sockets), set()
        for sock in open_sockets:
            _close(sock)
        self._thread.join(timeout=5)

    # -- connections ---------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _connect_upstream(self) -> socket.socket | None:
        with self._lock:
            start = self._next
            self._next = (self._next + 1) % len(self.upstreams)
        for offset in range(len(self.upstreams)):
            port = self.upstreams[(start + offset) % len(self.upstreams)]
            try:
                return socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S)
            except OSError:
                with self._lock:
                    self.stats.upstream_refused += 1
        return None

    def _track(self, *socks: socket.socket) -> bool:
        with self._lock:
            if self._closed.is_set():
                return False
            self._sockets.update(socks)
            return True

    def _serve(self, client: socket.socket) -> None:
        server = self._connect_upstream()
        if server is None:
            _close(client)
            return
        try:
            if self._track(client, server):
                with self._lock:
                    self.stats.connections += 1
                    conn_no = self.stats.connections
                self._pump(client, server, conn_no)
        finally:
            with self._lock:
                self._sockets.discard(client)
                self._sockets.discard(server)
            _close(client)
            _close(server)

    def _pump(self, client: socket.socket, server: socket.socket, conn_no: int) -> None:
        bursts, last, armed = 0, "", False
        for sock in (client, server):
            sock.settimeout(None)
        while not self._closed.is_set():
            try:
                readable, _, _ = select.select([client, server], [], [], 0.5)
                for sock in readable:
                    data = sock.recv(CHUNK)
                    if not data:
                        return
                    if sock is client:
                        if last != "c":
                            bursts += 1
                            armed = armed or self._arm(bursts)
                        last = "c"
                        server.sendall(data)
                        continue
                    last = "s"
                    if armed and len(data) >= MIN_RESPONSE_BYTES:
                        self._dropped(conn_no)
                        return  # closing both sides loses the answer
                    self._delay()
                    client.sendall(data)
            except (OSError, ValueError):
                return

    def _arm(self, bursts: int) -> bool:
        probability = self.drop_probability
        return bursts > HANDSHAKE_BURSTS and probability > 0 and self._rng.random() < probability

    def _dropped(self, conn_no: int) -> None:
        with self._lock:
            self.stats.dropped_responses += 1
        if self._on_drop is not None:
            self._on_drop(conn_no)

    def _delay(self) -> None:
        latency = self.latency_s
        if latency > 0:
            with self._lock:
                self.stats.delayed_chunks += 1
            time.sleep(latency)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
