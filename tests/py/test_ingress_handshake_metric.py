"""`qinglong_ingress_tls_handshakes_total{outcome}`: one count per TLS handshake,
not per request, so `bench e2e` can divide it by requests served (no database
needed: the requests are refused by the application, after the handshake)."""

from __future__ import annotations

import http.client
import json
import ssl
import time

import pytest

from tests.py import ingress_harness
from tests.py.ingress_harness import (
    UNREACHABLE_DSN,
    IngressFactory,
    IngressThread,
    PkiSet,
    client_context,
    ingress_config,
)

# Shared fixtures (pytest collects them through these module names).
start_ingress_thread = ingress_harness.start_ingress_thread
test_pki = ingress_harness.test_pki

WORKER = "0b1e7a2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"
HEARTBEAT = json.dumps({"schema": "qinglong/session-heartbeat-request@v1", "workerId": WORKER,
                        "sessionId": "0b1e7a2c-3d4e-4f50-8a6b-7c8d9e0f1a2c",
                        "generation": 1}).encode()  # fmt: skip


@pytest.fixture
def server(start_ingress_thread: IngressFactory, test_pki: PkiSet) -> IngressThread:
    return start_ingress_thread(ingress_config(test_pki, UNREACHABLE_DSN))


def _request(conn: http.client.HTTPSConnection) -> int:
    conn.request("POST", "/v1/sessions/heartbeat", body=HEARTBEAT,
                 headers={"Content-Type": "application/json"})  # fmt: skip
    response = conn.getresponse()
    response.read()
    return response.status


def _scrape(server: IngressThread) -> tuple[dict[str, float], float]:
    """(handshakes by outcome, requests) as a scraper sees them on /metrics."""
    handshakes: dict[str, float] = {}
    requests = 0.0
    for line in server.metrics_text().splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith('qinglong_ingress_tls_handshakes_total{outcome="'):
            handshakes[name.split('"')[1]] = float(value)
        elif name.startswith("qinglong_ingress_requests_total{"):
            requests += float(value)
    return handshakes, requests


def _wait_for(predicate: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_counts_handshakes_per_connection_not_per_request(
    server: IngressThread, test_pki: PkiSet
) -> None:
    ctx = client_context(test_pki, test_pki.worker_cert(WORKER))
    conns = [http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
             for _ in range(3)]  # fmt: skip
    try:
        # No credential: refused by the application (401), i.e. after the handshake.
        statuses = [_request(conns[0]), _request(conns[0]), _request(conns[1]),
                    _request(conns[2])]  # fmt: skip
        assert statuses == [401] * 4
        # The two requests on the first connection really shared it (keep-alive).
        assert conns[0].sock is not None
    finally:
        for conn in conns:
            conn.close()

    handshakes, requests = _scrape(server)
    assert handshakes == {"full": 3}
    assert requests >= 4
    assert server.metrics.tls_handshakes.value("full") == 3


def test_refused_handshake_counts_as_failed(server: IngressThread, test_pki: PkiSet) -> None:
    no_cert = client_context(test_pki, None)
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=no_cert, timeout=5)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        _request(conn)
    conn.close()
    _wait_for(lambda: server.metrics.tls_handshakes.value("failed") == 1)
    handshakes, _ = _scrape(server)
    assert handshakes.get("failed") == 1 and "full" not in handshakes
    # The older failure counter stays in step with the labelled one.
    assert server.metrics.connections_refused.value() == 1
