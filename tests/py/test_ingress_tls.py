"""Handshake refusals, connection limits and header deadlines (no database needed)."""

from __future__ import annotations

import asyncio
import http.client
import json
import signal
import socket
import ssl
import time
from asyncio import sslproto

import pytest

from qinglong.service.tls import TlsConfigError, load_anchor_bundle, server_tls
from qinglong.service.tls_site import TLS_READ_BUFFER_BYTES, _LeanTlsProtocol
from tests.py import ingress_harness
from tests.py.ingress_harness import (
    UNREACHABLE_DSN,
    IngressFactory,
    IngressTree,
    PkiSet,
    client_context,
    ingress_config,
    post,
    start_ingress_tree,
    tls_socket,
)

# Shared fixtures (pytest collects them through these module names).
start_ingress_thread = ingress_harness.start_ingress_thread
test_pki = ingress_harness.test_pki

WORKER = "0b1e7a2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"
HEARTBEAT = {
    "schema": "qinglong/session-heartbeat-request@v1",
    "workerId": WORKER,
    "sessionId": "0b1e7a2c-3d4e-4f50-8a6b-7c8d9e0f1a2c",
    "generation": 1,
}
HANDSHAKE_REFUSED = (ssl.SSLError, ConnectionError, http.client.RemoteDisconnected, OSError)


@pytest.fixture
def server(start_ingress_thread: IngressFactory, test_pki: PkiSet):
    return start_ingress_thread(ingress_config(test_pki, UNREACHABLE_DSN))


def _request_with(port: int, ctx: ssl.SSLContext) -> int:
    return post(port, "/v1/sessions/heartbeat", HEARTBEAT, ctx=ctx, token=None).status


def test_valid_client_certificate_reaches_the_application(server, test_pki):
    ctx = client_context(test_pki, test_pki.worker_cert(WORKER))
    # No credential: the request got through TLS and was refused by the app.
    reply = post(server.port, "/v1/sessions/heartbeat", HEARTBEAT, ctx=ctx)
    assert reply.status == 401
    assert reply.json == {
        "schema": "qinglong/error@v1",
        "error": "unauthorized",
        "reason": "missing_credential",
    }
    with tls_socket(server.port, ctx) as sock:
        assert sock.version() == "TLSv1.3"


def test_plaintext_is_refused(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    with pytest.raises(HANDSHAKE_REFUSED):
        conn.request("POST", "/v1/sessions/heartbeat", body=b"{}")
        conn.getresponse().read()
    conn.close()


def test_tls12_client_is_refused(server, test_pki):
    ctx = client_context(test_pki, test_pki.worker_cert(WORKER), tls12=True)
    with pytest.raises(ssl.SSLError):
        tls_socket(server.port, ctx)


@pytest.mark.parametrize("kind", ["none", "foreign", "expired"])
def test_bad_client_certificates_are_refused(server, test_pki, kind):
    cert = {
        "none": None,
        "foreign": test_pki.worker_cert(WORKER, foreign=True),
        "expired": test_pki.worker_cert(WORKER, expired=True),
    }[kind]
    ctx = client_context(test_pki, cert)
    # TLS 1.3: the client finishes its side first; the refusal (an alert) arrives
    # on the first read after the handshake.
    with pytest.raises(HANDSHAKE_REFUSED):
        _request_with(server.port, ctx)
    deadline = time.monotonic() + 5  # the server thread counts it a moment later
    while server.metrics.connections_refused.value() < 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_connection_limit_really_bounds_connections(start_ingress_thread, test_pki):
    server = start_ingress_thread(
        ingress_config(test_pki, UNREACHABLE_DSN, max_connections=2, header_timeout_s=30.0)
    )
    ctx = client_context(test_pki, test_pki.worker_cert(WORKER))
    held = [tls_socket(server.port, ctx), tls_socket(server.port, ctx)]
    try:
        # The third TCP connect lands in the backlog, but nobody accepts it, so its
        # handshake cannot complete while two connections hold the slots.
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=1.0)
        with pytest.raises((TimeoutError, socket.timeout)):
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        raw.close()
        held.pop().close()
        deadline = time.monotonic() + 5
        while True:  # the slot is freed once the server sees the close
            try:
                held.append(tls_socket(server.port, ctx, timeout=1.0))
                break
            except (TimeoutError, ssl.SSLError, OSError):
                if time.monotonic() > deadline:
                    raise
    finally:
        for sock in held:
            sock.close()


def test_partial_request_head_is_closed_after_the_header_deadline(start_ingress_thread, test_pki):
    server = start_ingress_thread(ingress_config(test_pki, UNREACHABLE_DSN, header_timeout_s=1.0))
    ctx = client_context(test_pki, test_pki.worker_cert(WORKER))
    with tls_socket(server.port, ctx, timeout=10) as sock:
        sock.sendall(b"POST /v1/offers/pull HTTP/1.1\r\nHost: x\r\n")  # never finished
        started = time.monotonic()
        assert sock.recv(1024) == b""  # server closed the connection
        assert time.monotonic() - started < 5


def test_worker_ca_bundle_needs_one_to_eight_anchors(tmp_path, test_pki):
    one = (test_pki.ca_dir / "ca.pem").read_bytes()
    (tmp_path / "empty.pem").write_bytes(b"")
    (tmp_path / "nine.pem").write_bytes(one * 9)
    (tmp_path / "eight.pem").write_bytes(one * 8)
    assert "BEGIN CERTIFICATE" in load_anchor_bundle(str(tmp_path / "eight.pem"))
    for name in ("empty.pem", "nine.pem"):
        with pytest.raises(TlsConfigError):
            load_anchor_bundle(str(tmp_path / name))


def test_a_non_ascii_bundle_is_a_config_error_and_reload_keeps_the_old_context(
    tmp_path, test_pki, caplog
):
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes((test_pki.ca_dir / "ca.pem").read_bytes())
    tls = server_tls(str(test_pki.server.cert_file), str(test_pki.server.key_file), str(bundle))
    before = tls.context
    bundle.write_bytes("# Zürich CA\n".encode() + (test_pki.ca_dir / "ca.pem").read_bytes())
    with pytest.raises(TlsConfigError, match="non-ASCII byte at offset 3"):
        load_anchor_bundle(str(bundle))
    with caplog.at_level("ERROR", logger="qinglong.ingress.tls"), pytest.raises(TlsConfigError):
        tls.reload()
    assert tls.context is before
    assert [r.event for r in caplog.records] == ["tls.reload_failed"]


def test_lean_tls_protocol_still_sizes_its_buffer_by_max_size(test_pki):
    """service/tls_site.py subclasses the private asyncio.sslproto.SSLProtocol and
    overrides `max_size`: this fails if CPython stops reading that attribute."""
    assert isinstance(sslproto.SSLProtocol.__dict__.get("max_size"), int)
    context = server_tls(
        str(test_pki.server.cert_file), str(test_pki.server.key_file), test_pki.ca_file
    ).context
    loop = asyncio.new_event_loop()
    try:
        proto = _LeanTlsProtocol(loop, asyncio.Protocol(), context, None, server_side=True)
        assert len(proto.get_buffer(-1)) == TLS_READ_BUFFER_BYTES == 4096
        assert len(proto.get_buffer(1 << 20)) == TLS_READ_BUFFER_BYTES
        assert (
            len(
                sslproto.SSLProtocol(
                    loop, asyncio.Protocol(), context, None, server_side=True
                ).get_buffer(-1)
            )
            > 4096
        )
    finally:
        loop.close()


def test_malformed_http_gets_the_json_envelope(server, test_pki):
    ctx = client_context(test_pki, test_pki.worker_cert(WORKER))
    with tls_socket(server.port, ctx, timeout=10) as sock:
        sock.sendall(b"POST /v1/offers/pull HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].endswith(b" 400 Bad Request")
    assert b"application/json" in head
    assert json.loads(body) == {
        "schema": "qinglong/error@v1",
        "error": "bad_request",
        "reason": "malformed_http",
    }


@pytest.mark.parametrize("processes", [1, 2])
def test_sighup_reloads_the_worker_ca_bundle(tmp_path, test_pki, processes):
    """SIGHUP swaps in the worker CA bundle read from the file again: a worker
    certificate of the new CA now connects, one of the old CA is refused; a bundle
    that cannot be used keeps the previous one, logs it and counts it (on every
    process: the supervisor forwards SIGHUP)."""
    bundle = tmp_path / "worker-ca.pem"
    bundle.write_bytes((test_pki.ca_dir / "ca.pem").read_bytes())
    tree = start_ingress_tree(
        tmp_path / "ingress",
        test_pki,
        UNREACHABLE_DSN,
        processes=processes,
        clientCaFile=str(bundle),
        acquireTimeoutMs=100,
    )  # 401s try to store the denial
    old = client_context(test_pki, test_pki.worker_cert(WORKER))
    new = client_context(test_pki, test_pki.worker_cert(WORKER, foreign=True))
    try:
        assert _request_with(tree.port, old) == 401
        with pytest.raises(HANDSHAKE_REFUSED):
            _request_with(tree.port, new)

        bundle.write_bytes((test_pki.foreign_ca_dir / "ca.pem").read_bytes())
        tree.signal(signal.SIGHUP)
        _wait_metric(tree, 'qinglong_ingress_tls_reloads_total{outcome="ok"}', processes)
        for _ in range(4 * processes):  # fresh connections reach every process
            assert _request_with(tree.port, new) == 401
            with pytest.raises(HANDSHAKE_REFUSED):
                _request_with(tree.port, old)

        bundle.write_bytes(b"not a certificate\n")
        tree.signal(signal.SIGHUP)
        _wait_metric(tree, 'qinglong_ingress_tls_reloads_total{outcome="failed"}', processes)
        for _ in range(2 * processes):  # the previous (foreign CA) bundle stays in use
            assert _request_with(tree.port, new) == 401
        assert tree.log_text().count('"event":"tls.reload_failed"') == processes

        # Valid certificates around a non-ASCII comment: refused the same way.
        bundle.write_bytes("# Zürich CA\n".encode() + (test_pki.ca_dir / "ca.pem").read_bytes())
        tree.signal(signal.SIGHUP)
        _wait_metric(tree, 'qinglong_ingress_tls_reloads_total{outcome="failed"}', 2 * processes)
        for _ in range(2 * processes):
            assert _request_with(tree.port, new) == 401
        assert tree.log_text().count('"event":"tls.reload_failed"') == 2 * processes
        assert "Traceback" not in tree.log_text()
    finally:
        assert tree.stop() == 0


def _wait_metric(tree: IngressTree, series: str, value: float) -> None:
    deadline = time.monotonic() + 10
    while tree.metric_sum(series) < value:
        assert time.monotonic() < deadline, series
        time.sleep(0.05)
