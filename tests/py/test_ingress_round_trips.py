"""SPEC §5: a steady-state pull costs exactly one database round trip.

Two independent counts, both without pg_stat_statements:
* the ingress's own database-call histogram in /metrics grows by exactly one
  `pull_offer` observation per pull, offered, replayed or idle;
* on the wire: the ingress reaches PostgreSQL through a counting TCP proxy that
  parses the server's protocol messages and counts ReadyForQuery ('Z') — one per
  client round trip (every Sync or simple Query is answered by exactly one 'Z').

(`pg_stat_database.xact_commit` was considered as the cross-check, but autovacuum
workers commit transactions in the test database at unpredictable moments and
backends flush their counters lazily, so an exact delta would be flaky; the wire
count is exact and also catches a non-transactional extra round trip.)
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.py import ingress_harness
from tests.py.ingress_harness import (
    Agent,
    IngressThread,
    ingress_config,
    make_agent,
    open_body,
    post,
    pull_body,
)

ingress_dsn = ingress_harness.ingress_dsn
prov = ingress_harness.prov
start_ingress_thread = ingress_harness.start_ingress_thread
su_conn = ingress_harness.su_conn
test_pki = ingress_harness.test_pki


class CountingProxy:
    """Forwards TCP to PostgreSQL and counts the server's ReadyForQuery messages.

    The connection of the ingress's certificate-revocation listener (its own,
    read-only, every 2 s: service/cert_revocation.py) is forwarded but not
    counted: it is no pull's round trip. It is told apart by the
    application_name of its startup message."""

    UNCOUNTED_APPLICATION = b"qinglong-ingress-certificates"

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.ready_for_query = 0
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            startup = _read_startup(client)
            upstream.sendall(startup)
            counted = self.UNCOUNTED_APPLICATION not in startup
            with self._lock:
                self.connections += counted
                self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(
                target=self._pump, args=(upstream, client, counted), daemon=True
            ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_server: bool) -> None:
        pending = b""
        try:
            while data := src.recv(65536):
                dst.sendall(data)
                if from_server:
                    pending = self._count(pending + data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _count(self, buffer: bytes) -> bytes:
        # Backend messages: 1 type byte + int32 length (including itself) + payload.
        # sslmode/gssencmode are disabled, so the stream starts with a message.
        while len(buffer) >= 5:
            end = 1 + int.from_bytes(buffer[1:5], "big")
            if len(buffer) < end:
                break
            if buffer[:1] == b"Z":
                with self._lock:
                    self.ready_for_query += 1
            buffer = buffer[end:]
        return buffer

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()


def _read_startup(client: socket.socket) -> bytes:
    """The client's StartupMessage (int32 length including itself, then the body)."""
    data = b""
    while len(data) < 4 or len(data) < int.from_bytes(data[:4], "big"):
        chunk = client.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


@pytest.fixture
def proxied(ingress_dsn: str, start_ingress_thread, test_pki) -> Iterator[tuple]:
    params = conninfo_to_dict(ingress_dsn)
    host = str(params.get("host") or "")
    if not host or host.startswith("/"):
        pytest.skip("needs a TCP PostgreSQL")
    proxy = CountingProxy(host, int(params.get("port") or 5432))
    dsn = make_conninfo(
        ingress_dsn, host="127.0.0.1", port=str(proxy.port), sslmode="disable", gssencmode="disable"
    )
    # One pooled connection, so every call shares one backend and one count.
    server = start_ingress_thread(ingress_config(test_pki, dsn, pool_min_size=1, pool_max_size=1))
    try:
        yield server, proxy
    finally:
        proxy.close()


def _db_calls(server: IngressThread, function: str) -> int:
    text = server.metrics_text()
    match = re.search(
        r'^qinglong_ingress_db_call_duration_seconds_count\{function="' + function + r'"\} (\d+)$',
        text,
        re.M,
    )
    return int(match.group(1)) if match else 0


def _all_db_calls(server: IngressThread) -> int:
    text = server.metrics_text()
    return sum(
        int(n)
        for n in re.findall(
            r"^qinglong_ingress_db_call_duration_seconds_count\{[^}]*\} (\d+)$", text, re.M
        )
    )


def test_one_round_trip_per_pull(proxied, prov, test_pki):
    server, proxy = proxied
    agent: Agent = make_agent(prov, test_pki, "worker-a")
    reply = post(server.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token)
    assert reply.status == 201
    session = reply.json
    task = prov.task("t")
    # Warm-up: the first execution of a statement also prepares it server-side.
    assert (
        post(
            server.port,
            "/v1/offers/pull",
            pull_body(agent, session),
            ctx=agent.ctx,
            token=agent.token,
        ).json["status"]
        == "idle"
    )
    prov.enqueue(task, count=2)
    # The counter really sees the ingress's traffic: one backend, startup + calls.
    assert proxy.connections == 1 and proxy.ready_for_query >= 3

    offered = pull_body(agent, session)
    cases = [
        ("offered", offered),
        ("offered", offered),
        ("offered", pull_body(agent, session)),
        ("idle", pull_body(agent, session)),
        ("idle", pull_body(agent, session)),
    ]
    for expected, body in cases:
        calls, all_calls = _db_calls(server, "pull_offer"), _all_db_calls(server)
        trips, connections = proxy.ready_for_query, proxy.connections
        reply = post(server.port, "/v1/offers/pull", body, ctx=agent.ctx, token=agent.token)
        assert reply.status == 200 and reply.json["status"] == expected, reply.body
        assert _db_calls(server, "pull_offer") == calls + 1
        assert _all_db_calls(server) == all_calls + 1  # nothing but the pull itself
        assert (proxy.ready_for_query, proxy.connections) == (trips + 1, connections), expected
