"""One process of `bench fleet`'s idle fleet: many simulated workers, one asyncio loop.

`python -m tools.bench.fleet_driver SPEC.json OUT.json`. Each simulated worker
is what a real idle worker is on the wire: its own TLS 1.3 connection with its
own client certificate (kept alive), a session opened with `POST /v1/sessions`,
then `POST /v1/offers/pull` with a fresh offer id and lease token, waiting the
answer's `retryAfterMs` between pulls, and `POST /v1/sessions/heartbeat` every
`heartbeatIntervalMs`; after a 503 or a failed connection it waits what a real
worker waits (worker/backoff.py, at least the answer's Retry-After) and tries
again, and a 409 on a pull opens a new session. HTTP/1.1 is spoken by hand (a
request line, five headers, a Content-Length body; the answer's head and
Content-Length body) so the driver spends little CPU next to the ingress it
measures: 86-103 µs of CPU per request against 245-263 µs for aiohttp's client
(3,000 POSTs each on one kept-alive loopback connection to an aiohttp server,
2026-12-01, the 2-CPU box of docs/BENCHMARKS.md) — at 2,000 idle pulls a second
that is a fifth of a CPU instead of half of one, on the same 2 CPUs as the
ingress. tests/py/test_bench_fleet.py runs it against the real ingress.

SPEC: {"host", "port", "caFile", "workers": [{"workerId", "certFile",
"keyFile", "credentialFile"}], "rampS", "windowStart", "windowEnd"} (wall-clock
seconds). Writes OUT: pulls, heartbeats and errors counted inside the window,
the pulls' latencies (ms), statuses seen, and the ready time.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import secrets
import ssl
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qinglong.worker.backoff import DEFAULT_POLICY

CAPABILITIES = {"schema": "qinglong/worker-capabilities@v1", "executors": ["remote-worker"],
                "labels": {}, "runtimes": {}, "slots": 4}  # fmt: skip
MAX_BODY = 1 << 20
_RNG = random.Random()


@dataclass
class Tally:
    window: tuple[float, float]
    pull_ms: list[float] = field(default_factory=list)
    heartbeats: int = 0
    errors: list[str] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    opened: int = 0

    def inside(self, at: float) -> bool:
        return self.window[0] <= at < self.window[1]


class Connection:
    """One kept-alive HTTPS connection of one simulated worker."""

    def __init__(self, host: str, port: int, ctx: ssl.SSLContext, authorization: str) -> None:
        self.host, self.port, self.ctx = host, port, ctx
        self.head = (f"Host: {host}:{port}\r\nAuthorization: Bearer {authorization}\r\n"
                     "Content-Type: application/json\r\nAccept: application/json\r\n"
                     "Accept-Encoding: identity\r\n")  # fmt: skip
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.retry_after_s = 0  # the last answer's Retry-After (0: none)
        self.failures = 0  # consecutive failures: the backoff's attempt index

    async def post(self, path: str, doc: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.ctx, server_hostname=self.host
            )
        assert self.reader is not None
        body = json.dumps(doc, separators=(",", ":")).encode()
        self.writer.write(f"POST {path} HTTP/1.1\r\n{self.head}Content-Length: {len(body)}"
                          f"\r\n\r\n".encode("ascii") + body)  # fmt: skip
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length, close = 0, False
        self.retry_after_s = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "connection" and value.strip().lower() == "close":
                close = True
            elif name.lower() == "retry-after" and value.strip().isdigit():
                self.retry_after_s = int(value)
        if length > MAX_BODY:
            raise ValueError(f"answer of {length} bytes")
        data = await self.reader.readexactly(length)
        if close:
            self.writer.close()
        return status, json.loads(data) if data else {}


def _context(ca_file: str, cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(cert, key)
    return ctx


async def _backoff(conn: Connection) -> None:
    """What a real worker waits after a failure (worker/backoff.py: full jitter,
    base 250 ms doubling to 60 s), never less than the answer's Retry-After."""
    delay_ms = DEFAULT_POLICY.delay_ms(min(conn.failures, 15), _RNG)
    conn.failures += 1
    await asyncio.sleep(max(delay_ms / 1000, conn.retry_after_s))


async def _post(conn: Connection, path: str, doc: dict[str, Any],
                tally: Tally) -> tuple[int, dict[str, Any]] | None:  # fmt: skip
    """One request; a transport failure or a 503 is counted and answered None after
    the worker's backoff (it reconnects on the next request)."""
    try:
        status, answer = await conn.post(path, doc)
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
        tally.errors.append(f"{path} {type(exc).__name__}")
        if conn.writer is not None:
            conn.writer.close()
        conn.writer, conn.retry_after_s = None, 0
        await _backoff(conn)
        return None
    if status == 503:
        tally.errors.append(f"{path} 503 {answer.get('reason')}")
        await _backoff(conn)
        return None
    conn.failures = 0
    return status, answer


async def _open(conn: Connection, worker_id: str, tally: Tally) -> dict[str, Any] | None:
    """Open a session; a 503 or a transport failure is retried after the worker's
    backoff until the window ends."""
    while time.time() < tally.window[1]:
        opened = await _post(conn, "/v1/sessions", {
            "schema": "qinglong/session-open-request@v1", "workerId": worker_id,
            "capabilities": CAPABILITIES}, tally)  # fmt: skip
        if opened is None:
            continue
        status, session = opened
        if status == 201:
            return session
        tally.errors.append(f"open {status} {session.get('reason')}")
        return None
    return None


async def _worker(spec: dict[str, Any], ident: dict[str, str], tally: Tally,
                  delay_s: float) -> None:  # fmt: skip
    await asyncio.sleep(delay_s)  # the ramp: handshakes spread over rampS
    secret = Path(ident["credentialFile"]).read_text(encoding="ascii").strip()
    conn = Connection(
        spec["host"],
        spec["port"],
        _context(spec["caFile"], ident["certFile"], ident["keyFile"]),
        secret,
    )
    worker_id = ident["workerId"]
    session = await _open(conn, worker_id, tally)
    if session is None:
        return
    tally.opened += 1
    fence = {"workerId": worker_id, "sessionId": session["sessionId"],
             "generation": session["generation"]}  # fmt: skip
    beat_every = session["heartbeatIntervalMs"] / 1000
    next_beat = time.monotonic() + random.uniform(0, beat_every)  # a random phase
    while time.time() < tally.window[1]:
        if time.monotonic() >= next_beat:
            beat = await _post(conn, "/v1/sessions/heartbeat", {
                "schema": "qinglong/session-heartbeat-request@v1", **fence}, tally)  # fmt: skip
            if beat is not None and beat[0] != 200:
                tally.errors.append(f"heartbeat {beat[0]} {beat[1].get('reason')}")
            elif beat is not None and tally.inside(time.time()):
                tally.heartbeats += 1
            next_beat += beat_every
        token = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        started = time.perf_counter()
        pulled = await _post(conn, "/v1/offers/pull", {
            "schema": "qinglong/offer-pull-request@v1", **fence,
            "offerId": str(uuid.uuid4()), "leaseToken": token}, tally)  # fmt: skip
        if pulled is None:
            continue
        status, answer = pulled
        elapsed_ms = (time.perf_counter() - started) * 1000
        if status == 409:  # the session ended (e.g. heartbeats refused): a new one
            tally.errors.append(f"pull 409 {answer.get('reason')}")
            session = await _open(conn, worker_id, tally)
            if session is None:
                return
            fence = {"workerId": worker_id, "sessionId": session["sessionId"],
                     "generation": session["generation"]}  # fmt: skip
            continue
        kind = str(answer.get("status") or answer.get("reason") or status)
        if tally.inside(time.time()):
            tally.pull_ms.append(elapsed_ms)
            tally.statuses[kind] = tally.statuses.get(kind, 0) + 1
        retry_ms = answer.get("retryAfterMs") if status == 200 else None
        await asyncio.sleep((retry_ms if isinstance(retry_ms, int) else 2000) / 1000)


async def _main(spec: dict[str, Any], out: Path) -> None:
    tally = Tally((spec["windowStart"], spec["windowEnd"]))
    workers = spec["workers"]
    ramp = spec["rampS"]
    tasks = [asyncio.create_task(_worker(spec, ident, tally, ramp * i / max(len(workers), 1)))
             for i, ident in enumerate(workers)]  # fmt: skip
    results = await asyncio.gather(*tasks, return_exceptions=True)
    tally.errors += [f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)]
    out.write_text(
        json.dumps(
            {
                "workers": len(workers),
                "opened": tally.opened,
                "pullMs": tally.pull_ms,
                "heartbeats": tally.heartbeats,
                "statuses": tally.statuses,
                "errors": tally.errors[:20],
                "errorCount": len(tally.errors),
            }
        ),
        encoding="utf-8",
    )


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    asyncio.run(_main(spec, Path(argv[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
