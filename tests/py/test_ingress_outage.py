"""Database outage (own cluster) and the real `qinglong ingress serve` process."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from qinglong.db.migrator import migrate
from qinglong.service import pki
from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py import ingress_harness
from tests.py.ingress_harness import (
    INGRESS_ROLE,
    UNREACHABLE_DSN,
    client_context,
    ensure_ingress_role,
    ingress_config,
    make_agent,
    open_body,
    post,
    pull_body,
    tls_socket,
)
from tests.py.provision import Provisioner

# Shared fixtures (pytest collects them through these module names).
start_ingress_thread = ingress_harness.start_ingress_thread
test_pki = ingress_harness.test_pki


def _admin_status(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.skipif(bool(os.environ.get("QL_TEST_DSN")), reason="needs a cluster we may stop")
def test_database_outage_is_503_and_recovers_without_restart(start_ingress_thread, test_pki):
    cluster = ThrowawayPostgres()
    try:
        cluster.start()
        su_dsn = cluster.create_database("ql_outage")
        migrate(su_dsn)
        ensure_ingress_role(cluster.dsn("postgres"))
        with psycopg.connect(su_dsn, autocommit=True) as conn:
            agent = make_agent(Provisioner(conn), test_pki, "outage")
        config = ingress_config(
            test_pki,
            cluster.dsn("ql_outage", user=INGRESS_ROLE),
            statement_timeout_ms=2000,
            acquire_timeout_ms=1500,
        )
        server = start_ingress_thread(config)
        opened = post(
            server.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token
        )
        assert opened.status == 201
        session = opened.json
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

        cluster.stop(mode="immediate")
        for _ in range(3):
            started = time.monotonic()
            reply = post(
                server.port,
                "/v1/offers/pull",
                pull_body(agent, session),
                ctx=agent.ctx,
                token=agent.token,
            )
            elapsed = time.monotonic() - started
            assert reply.status == 503, reply.body
            assert reply.json["schema"] == "qinglong/error@v1"
            assert reply.json["error"] == "unavailable"
            assert int(reply.headers["Retry-After"]) >= 1
            assert elapsed < config.statement_timeout_ms / 1000 + 0.5
        assert _admin_status(server.admin_port, "/readyz") == 503
        assert _admin_status(server.admin_port, "/healthz") == 200

        cluster.restart()  # same data dir, same port
        deadline = time.monotonic() + 30
        while True:
            reply = post(
                server.port,
                "/v1/offers/pull",
                pull_body(agent, session),
                ctx=agent.ctx,
                token=agent.token,
            )
            if reply.status == 200:
                break
            assert reply.status == 503
            assert time.monotonic() < deadline, "ingress did not recover"
            time.sleep(0.3)
        assert reply.json["status"] == "idle"
        assert _admin_status(server.admin_port, "/readyz") == 200
        assert (
            server.metrics.db_errors.value("connection") + server.metrics.db_errors.value("pool")
            >= 1
        )
    finally:
        cluster.cleanup()


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "ingress did not start"
        time.sleep(0.05)
    return json.loads(path.read_text())


def _peer_cert(port: int, ctx) -> bytes:
    with tls_socket(port, ctx) as sock:
        return sock.getpeercert(binary_form=True)


def test_serve_process_reloads_on_sighup_and_drains_on_sigterm(tmp_path, test_pki):
    ready = tmp_path / "ready.json"
    config = {  # camelCase keys, as a dev env would write them
        "dsn": UNREACHABLE_DSN,
        "certFile": str(test_pki.server.cert_file),
        "keyFile": str(test_pki.server.key_file),
        "clientCaFile": test_pki.ca_file,
        "port": 0,
        "adminPort": 0,
        "readyFile": str(ready),
        "acquireTimeoutMs": 2000,
        "auditLog": str(tmp_path / "audit.jsonl"),
    }
    (tmp_path / "ingress.json").write_text(json.dumps(config))
    # One process: the test reads this process's stdout and its one admin listener
    # (without --processes, serve starts one child per CPU under a supervisor).
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "qinglong",
            "ingress",
            "serve",
            "--processes",
            "1",
            "--config",
            str(tmp_path / "ingress.json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        urls = _wait_for(ready, proc)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert children == [], "the ingress must serve in this one process"
        port = int(urls["ingressUrl"].rsplit(":", 1)[1])
        admin_port = int(urls["adminUrl"].rsplit(":", 1)[1])
        assert _admin_status(admin_port, "/healthz") == 200
        ctx = client_context(test_pki, test_pki.worker_cert("0b1e7a2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"))
        before = _peer_cert(port, ctx)

        pki.issue_server_cert(
            test_pki.ca_dir, test_pki.server.cert_file.parent, ("localhost", "127.0.0.1")
        )
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while _peer_cert(port, ctx) == before:
            assert time.monotonic() < deadline, "certificate not reloaded"
            time.sleep(0.1)

        # An in-flight request (its handler waiting on the database pool when
        # SIGTERM arrives) is still answered before the process exits.
        worker = "0b1e7a2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"
        body = json.dumps(
            {
                "schema": "qinglong/offer-pull-request@v1",
                "workerId": worker,
                "sessionId": worker,
                "generation": 1,
                "offerId": worker,
                "leaseToken": "A" * 43,
            }
        ).encode()
        sock = tls_socket(port, ctx, timeout=10)
        sock.sendall(
            b"POST /v1/offers/pull HTTP/1.1\r\nHost: x\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        time.sleep(0.3)  # the missing-credential denial is now waiting for a connection
        proc.send_signal(signal.SIGTERM)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        sock.close()
        assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
        assert b'"reason":"missing_credential"' in answer
        assert proc.wait(20) == 0
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["event"] == "listening"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
