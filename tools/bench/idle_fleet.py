"""`bench idle` part 2: a simulated fleet of idle workers against one ingress replica.

10,000 real TLS connections (each with its own client certificate) cannot be
driven from this 2-core box, so the fleet drives the ingress *application*
in-process: the real aiohttp app (service.app.create_app: pool, idle view with
its real LISTEN connection, heartbeat batcher, middlewares, handlers, schema
validation, audit lines to a file) on a real PostgreSQL, one simulated worker
per asyncio task. Each request is a real aiohttp Request whose transport
presents that worker's real certificate (DER, SAN urn:qinglong:worker:<id>) the
way a verified TLS connection does; the TLS handshake and HTTP parsing are the
only parts of the ingress not exercised.

Cadence = the defaults: a pull, then wait the answer's retryAfterMs
(idle_retry_after_ms 2 s + up to idle_jitter_ms 1 s of jitter), and a session
heartbeat every heartbeatIntervalMs (20 s), first one at a random phase.
Database calls are counted at the gateway (the ingress's own db-call histogram)
and cross-checked with pg_stat_statements (top-level `SELECT ql.…` calls).
CPU is the process's CPU time over the window — the ingress *and* the in-process
fleet driver, so an upper bound for the ingress alone.
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import string
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from qinglong.db import api
from tools.bench.common import sha256, token

TARGET_DB_CALLS_PER_S = 333.0


@dataclass
class SimWorker:
    worker_id: str
    credential_id: str
    secret: str
    der: bytes
    session_id: str = ""
    generation: int = 0

    @property
    def authorization(self) -> str:
        return f"Bearer ql3w_{self.credential_id}_{self.secret}"


class _SslObject:
    def __init__(self, der: bytes) -> None:
        self._der = der

    def getpeercert(self, binary_form: bool = False) -> bytes:
        return self._der


class _Transport:
    """What identity.peer_certificate reads from a verified TLS connection."""

    def __init__(self, der: bytes) -> None:
        self._ssl = _SslObject(der)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._ssl
        if name == "peername":
            return ("127.0.0.1", 40000)
        return default

    def is_closing(self) -> bool:
        return False


def _certs(worker_ids: list[str]) -> list[bytes]:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    leaf_key = ec.generate_private_key(ec.SECP256R1()).public_key()
    issuer = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench fleet CA")])
    now = datetime.now(UTC)
    out = []
    for worker_id in worker_ids:
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, worker_id)]))
            .issuer_name(issuer)
            .public_key(leaf_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.UniformResourceIdentifier(f"urn:qinglong:worker:{worker_id}")]
                ),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        from cryptography.hazmat.primitives.serialization import Encoding

        out.append(cert.public_bytes(Encoding.DER))
    return out


def provision(dsn: str, count: int) -> list[SimWorker]:
    alphabet = string.ascii_lowercase + string.digits
    rows = []
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        for i in range(count):
            secret = token()
            credential_id = "".join(secrets.choice(alphabet) for _ in range(16))
            worker_id = api.register_worker(name=f"fleet-{i}").run(conn).doc["workerId"]
            api.grant_pool(worker_id=worker_id, pool="*").run(conn)
            api.issue_credential(
                worker_id=worker_id, credential_id=credential_id, secret_digest=sha256(secret)
            ).run(conn)
            rows.append((worker_id, credential_id, secret))
    ders = _certs([r[0] for r in rows])
    return [SimWorker(w, c, s, d) for (w, c, s), d in zip(rows, ders, strict=True)]


def _statements(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
            " AND query LIKE 'SELECT ql.%'"
        ).fetchone()
    return int(row[0]) if row else 0


@dataclass
class _Counts:
    pulls: int = 0
    idle: int = 0
    other: int = 0
    errors: int = 0
    heartbeats: int = 0
    statuses: dict[str, int] = field(default_factory=dict)

    def saw(self, what: str, status: int, doc: Any) -> None:
        reason = doc.get("reason") or doc.get("error") if isinstance(doc, dict) else None
        key = f"{what} {status}" + (f" {reason}" if status != 200 and reason else "")
        self.statuses[key] = self.statuses.get(key, 0) + 1


def _wal_lsn(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0]) if row else 0


def _barriers(metrics: Any) -> float:
    """Queries the idle view ran on its LISTEN connection (barriers and credential
    re-confirmations, any outcome)."""
    return sum(
        metrics.idle_view_barriers.value(kind, outcome)
        for kind in ("sync", "probe", "confirm")
        for outcome in ("ok", "retried", "discarded", "error")
    )


async def _drive(
    dsn: str,
    workers: list[SimWorker],
    warm_s: float,
    measure_s: float,
    *,
    heartbeats: bool = True,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from aiohttp import streams, web
    from aiohttp.test_utils import make_mocked_request

    from qinglong.service.app import build_state, create_app
    from qinglong.service.audit import AuditLog
    from qinglong.service.config import IngressConfig
    from qinglong.service.middlewares import envelope_middleware
    from qinglong.service.routes import OFFERS_PULL, SESSIONS, SESSIONS_HEARTBEAT
    from qinglong.service.views import heartbeat_session, open_session, pull_offer

    audit_dir = tempfile.mkdtemp(prefix="ql-fleet-")
    audit_file = open(Path(audit_dir) / "audit.log", "a", encoding="utf-8")
    config = replace(
        IngressConfig(dsn=dsn, cert_file="-", key_file="-", client_ca_file="-"),
        pool_max_size=8,
        rate_per_s=5.0,
        rate_burst=10,
        rate_max_tracked=max(100_000, len(workers) * 2),
        **(overrides or {}),
    ).validate()
    state = build_state(config, AuditLog(lambda line: audit_file.write(line + "\n")))
    app = create_app(state)
    runner = web.AppRunner(app)
    await runner.setup()
    tasks: list[asyncio.Task[None]] = []
    stop = asyncio.Event()
    try:
        loop = asyncio.get_running_loop()

        class _Proto:
            _reading_paused = False

            def pause_reading(self, *args: Any, **kwargs: Any) -> None: ...

            def resume_reading(self, *args: Any, **kwargs: Any) -> None: ...

        async def call(worker: SimWorker, path: str, handler: Any, body: dict[str, Any]) -> Any:
            data = json.dumps(body).encode()
            payload = streams.StreamReader(_Proto(), 2**16, loop=loop)  # type: ignore[arg-type]
            payload.feed_data(data)
            payload.feed_eof()
            request = make_mocked_request(
                "POST",
                path,
                headers={
                    "Authorization": worker.authorization,
                    "Content-Type": "application/json",
                    "Content-Length": str(len(data)),
                },
                app=app,
                transport=_Transport(worker.der),
                payload=payload,
                loop=loop,
            )
            response = await envelope_middleware(request, handler)
            return response.status, json.loads(response.body) if response.body else None

        caps = {
            "schema": "qinglong/worker-capabilities@v1",
            "executors": ["remote-worker"],
            "labels": {},
            "runtimes": {},
            "slots": 1,
        }
        gate = asyncio.Semaphore(8)

        async def open_one(worker: SimWorker) -> None:
            for _ in range(20):  # a real worker retries a 503 too
                async with gate:
                    status, doc = await call(
                        worker,
                        SESSIONS,
                        open_session,
                        {
                            "schema": "qinglong/session-open-request@v1",
                            "workerId": worker.worker_id,
                            "capabilities": caps,
                        },
                    )
                if status != 503:
                    break
                await asyncio.sleep(0.5)
            if status != 201:
                raise RuntimeError(f"session open failed: {status} {doc}")
            worker.session_id, worker.generation = doc["sessionId"], doc["generation"]

        await asyncio.gather(*(open_one(w) for w in workers))

        counts = _Counts()
        measuring = False

        async def live(worker: SimWorker) -> None:
            rng = random.Random()
            next_beat = loop.time() + rng.uniform(0, 20.0)
            await asyncio.sleep(rng.uniform(0, 3.0))
            while not stop.is_set():
                if heartbeats and loop.time() >= next_beat:
                    status, beat = await call(
                        worker,
                        SESSIONS_HEARTBEAT,
                        heartbeat_session,
                        {
                            "schema": "qinglong/session-heartbeat-request@v1",
                            "workerId": worker.worker_id,
                            "sessionId": worker.session_id,
                            "generation": worker.generation,
                        },
                    )
                    next_beat += 20.0
                    if measuring:
                        counts.heartbeats += 1
                        counts.errors += status != 200
                        counts.saw("heartbeat", status, beat)
                status, doc = await call(
                    worker,
                    OFFERS_PULL,
                    pull_offer,
                    {
                        "schema": "qinglong/offer-pull-request@v1",
                        "workerId": worker.worker_id,
                        "sessionId": worker.session_id,
                        "generation": worker.generation,
                        "offerId": str(uuid.uuid4()),
                        "leaseToken": token(),
                    },
                )
                wait = 2.0
                if measuring:
                    counts.pulls += 1
                    counts.saw("pull", status, doc)
                if status == 200 and doc.get("status") == "idle":
                    wait = doc["retryAfterMs"] / 1000
                    if measuring:
                        counts.idle += 1
                elif measuring:
                    counts.other += 1
                    counts.errors += status != 200
                try:
                    await asyncio.wait_for(stop.wait(), wait)
                except TimeoutError:
                    pass

        tasks.extend(asyncio.create_task(live(w)) for w in workers)
        await asyncio.sleep(warm_s)

        def gateway_calls() -> dict[str, int]:
            series = state.metrics.db_calls._series
            return {labels[0]: s.count for labels, s in series.items()}

        calls_before, pg_before = gateway_calls(), await asyncio.to_thread(_statements, dsn)
        wal_before, barriers_before = (
            await asyncio.to_thread(_wal_lsn, dsn),
            _barriers(state.metrics),
        )
        view_before = (
            state.metrics.idle_view_pulls.value("view"),
            state.metrics.idle_view_pulls.value("database"),
        )
        cpu_before, wall_before = time.process_time(), time.monotonic()
        lag, lag_samples = 0.0, 0
        measuring = True
        end = wall_before + measure_s
        while time.monotonic() < end:
            t = loop.time()
            await asyncio.sleep(0.1)
            lag += max(0.0, loop.time() - t - 0.1)
            lag_samples += 1
        measuring = False
        wall = time.monotonic() - wall_before
        cpu = time.process_time() - cpu_before
        calls_after, pg_after = gateway_calls(), await asyncio.to_thread(_statements, dsn)
        wal_after, barriers_after = await asyncio.to_thread(_wal_lsn, dsn), _barriers(state.metrics)
        view_after = (
            state.metrics.idle_view_pulls.value("view"),
            state.metrics.idle_view_pulls.value("database"),
        )

    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        await runner.cleanup()
        audit_file.close()
    db_errors = {
        kind: state.metrics.db_errors.value(kind)
        for kind in ("pool", "connection", "statement_timeout", "client_timeout", "unexpected")
    }
    by_function = {
        k: (calls_after.get(k, 0) - calls_before.get(k, 0)) / wall
        for k in calls_after
        if calls_after.get(k, 0) != calls_before.get(k, 0)
    }
    from_view = view_after[0] - view_before[0]
    from_db = view_after[1] - view_before[1]
    db_per_s = sum(by_function.values())
    return {
        "workers": len(workers),
        "windowS": wall,
        "warmS": warm_s,
        "pullsPerS": counts.pulls / wall,
        "heartbeatsPerS": counts.heartbeats / wall,
        "idlePulls": counts.idle,
        "nonIdlePulls": counts.other,
        "errors": counts.errors,
        "statuses": counts.statuses,
        "dbErrors": db_errors,
        "dbCallsPerS": db_per_s,
        "dbCallsByFunctionPerS": by_function,
        "pgStatementsPerS": (pg_after - pg_before) / wall,
        "shortcutRatio": from_view / (from_view + from_db) if from_view + from_db else 0.0,
        "cpuSecondsPerS": cpu / wall,
        "loopLagMeanMs": 1000 * lag / max(1, lag_samples),
        "walBytes": wal_after - wal_before,
        "walBytesPerPull": (wal_after - wal_before) / max(1, counts.pulls),
        "dbCallsPerPull": db_per_s * wall / max(1, counts.pulls),
        "barriersPerPull": (barriers_after - barriers_before) / max(1, counts.pulls),
        "targetDbCallsPerS": TARGET_DB_CALLS_PER_S,
        "targetMet": db_per_s <= TARGET_DB_CALLS_PER_S and counts.errors == 0,
    }


def run_fleet(
    dsn: str,
    workers: int,
    warm_s: float,
    measure_s: float,
    *,
    heartbeats: bool = True,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    fleet = provision(dsn, workers)
    return asyncio.run(
        _drive(dsn, fleet, warm_s, measure_s, heartbeats=heartbeats, overrides=overrides)
    )
