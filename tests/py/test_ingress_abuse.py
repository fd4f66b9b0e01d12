"""Abuse of the ingress listener: oversize and endless bodies,
giant headers, and a 500-connection slowloris, against `qinglong ingress serve`
running as its own process (so its RSS is its own) with short deadlines.

Deadlines under test (config): handshake 2 s, request head 2 s (aiohttp's
keep-alive timer, armed when the connection opens, not reset by incoming bytes),
body 2 s; bodies over 4 KiB are refused with 413 as soon as they are announced
or arrive. Results and the findings they led to: docs/SECURITY.md §3.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import resource
import ssl
import statistics
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from qinglong.throwaway_postgres import ThrowawayPostgres
from tests.py.ingress_harness import Agent, open_body, post, tls_socket
from tests.py.provision import new_token
from tests.py.security_support import (
    IngressProcess,
    World,
    module_world,
    percentile,
    read_status_kib,
    start_ingress_process,
)

# Minutes, not seconds: the full suite runs it; `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

DEADLINE_S = 2.0
# Scheduling slack on a shared 2-core box (timer granularity, a busy event loop).
SLACK_S = 1.5
ATTACK_TLS = 250
ATTACK_TCP = 250
LEGIT_SAMPLES = 150
LONG = os.environ.get("QL_FUZZ_LONG") == "1"


@dataclass
class Target:
    world: World
    server: IngressProcess
    agent: Agent
    session: dict[str, Any]

    @property
    def port(self) -> int:
        return self.server.port

    def refresh_session(self) -> None:
        """Keep the session alive across long measurements (60 s TTL)."""
        reply = post(
            self.port,
            "/v1/sessions/heartbeat",
            {
                "schema": "qinglong/session-heartbeat-request@v1",
                "workerId": self.agent.worker_id,
                "sessionId": self.session["sessionId"],
                "generation": self.session["generation"],
            },
            ctx=self.agent.ctx,
            token=self.agent.token,
        )
        assert reply.status == 200, reply.body

    def pull_body(self) -> dict[str, Any]:
        return {
            "schema": "qinglong/offer-pull-request@v1",
            "workerId": self.agent.worker_id,
            "sessionId": self.session["sessionId"],
            "generation": self.session["generation"],
            "offerId": str(uuid.uuid4()),
            "leaseToken": new_token(),
        }


def _target(world: World, tmp: Path, **config: Any) -> Iterator[Target]:
    server = start_ingress_process(
        tmp,
        world.pki,
        world.ingress_dsn,
        **{
            "handshakeTimeoutS": DEADLINE_S,
            "headerTimeoutS": DEADLINE_S,
            "bodyTimeoutS": DEADLINE_S,
            "backlog": 1024,
            # The attack holds many connections of one certificate identity; the
            # per-identity cap is not what this module measures.
            "maxConnectionsPerWorker": 1024,
            **config,
        },
    )
    try:
        agent = world.agent(f"abuse-{uuid.uuid4().hex[:8]}")
        reply = post(
            server.port, "/v1/sessions", open_body(agent), ctx=agent.ctx, token=agent.token
        )
        assert reply.status == 201, reply.body
        yield Target(world, server, agent, reply.json)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def abuse_world(
    pg_cluster: ThrowawayPostgres, migrated_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    with module_world(
        pg_cluster, migrated_template, tmp_path_factory.mktemp("abuse"), start_ingress=False
    ) as world:
        yield world


@pytest.fixture(scope="module")
def target(abuse_world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    # Room for the whole attack plus the legitimate client: the limit is not
    # what protects the legitimate worker here, the deadlines are.
    yield from _target(abuse_world, tmp_path_factory.mktemp("ingress"), maxConnections=1024)


# ------------------------------------------------------------------ raw requests


def _head(path: str = "/v1/offers/pull", extra: bytes = b"", token: str | None = None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n".encode() if token else b""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n".encode()
        + auth
        + extra
    )


def _read_until_closed(sock: ssl.SSLSocket, limit_s: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes; (data, seconds it took)."""
    started = time.monotonic()
    sock.settimeout(limit_s)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (ConnectionError, ssl.SSLError):
        pass  # a reset after the answer is a close too
    return data, time.monotonic() - started


def _status_and_doc(data: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body[: int(_header(head, b"content-length"))])


def _header(head: bytes, name: bytes) -> bytes:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    raise KeyError(name)


def test_content_length_10mb_is_refused_at_once(target: Target) -> None:
    with tls_socket(target.port, target.agent.ctx, timeout=10) as sock:
        sock.sendall(_head(extra=b"Content-Length: 10485760\r\n\r\n", token=target.agent.token))
        started = time.monotonic()
        # The answer comes on the announcement alone, before any body byte.
        sock.settimeout(SLACK_S)
        first = sock.recv(65536)
        answered = time.monotonic() - started
        status, doc = _status_and_doc(first)
        assert (status, doc["reason"]) == (413, "body_too_large")
        assert b"connection: close" in first.lower()
        # A client that pushes the announced body anyway is drained for the
        # lingering time (so it can still read the 413), then cut off.
        sent = 0
        try:
            sock.settimeout(0.2)
            while sent < 10 * 1024 * 1024 and time.monotonic() - started < DEADLINE_S + SLACK_S:
                sent += sock.send(b"x" * 65536)
        except (TimeoutError, ConnectionError, ssl.SSLError):
            pass
        _read_until_closed(sock, DEADLINE_S + SLACK_S)
        closed = time.monotonic() - started
    assert answered < SLACK_S, answered
    assert closed < DEADLINE_S + 2 * SLACK_S, closed


def test_chunked_body_over_4kib_is_refused(target: Target) -> None:
    with tls_socket(target.port, target.agent.ctx, timeout=10) as sock:
        sock.sendall(_head(extra=b"Transfer-Encoding: chunked\r\n\r\n", token=target.agent.token))
        started = time.monotonic()
        try:
            for _ in range(64):  # 64 x 1 KiB chunks, never the terminating 0-chunk
                sock.sendall(b"400\r\n" + b"x" * 1024 + b"\r\n")
        except (ConnectionError, ssl.SSLError):
            pass
        data, _ = _read_until_closed(sock, DEADLINE_S + SLACK_S)
        elapsed = time.monotonic() - started
    status, doc = _status_and_doc(data)
    assert (status, doc["reason"]) == (413, "body_too_large")
    assert elapsed < DEADLINE_S + 2 * SLACK_S, elapsed


def test_endless_small_chunks_hit_the_body_deadline(target: Target) -> None:
    """Under 4 KiB but never finished: answered 408 and closed at the body deadline."""
    with tls_socket(target.port, target.agent.ctx, timeout=10) as sock:
        sock.sendall(_head(extra=b"Transfer-Encoding: chunked\r\n\r\n", token=target.agent.token))
        started = time.monotonic()
        sock.settimeout(0.25)
        data = b""
        answered = None
        while time.monotonic() - started < 2 * DEADLINE_S + 2 * SLACK_S:
            try:
                sock.sendall(b"1\r\nx\r\n")  # one byte per chunk, 4 per second
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answered = answered or time.monotonic() - started
                data += chunk
            except TimeoutError:
                continue
            except (ConnectionError, ssl.SSLError):
                break
        elapsed = time.monotonic() - started
    status, doc = _status_and_doc(data)
    assert (status, doc["reason"]) == (408, "body_timeout")
    assert answered is not None and DEADLINE_S - 0.1 <= answered < DEADLINE_S + SLACK_S, answered
    # A client still sending is drained for the lingering time (2 s), then cut off.
    assert elapsed < 2 * DEADLINE_S + SLACK_S, elapsed


HEAD_ABUSE = {
    "header_line_64kib": b"X-Big: " + b"a" * 65536 + b"\r\n\r\n",
    "request_line_64kib": None,  # built below: a 64 KiB URL
    "ten_thousand_headers": b"".join(b"X-H%d: v\r\n" % i for i in range(10_000)) + b"\r\n",
}


@pytest.mark.parametrize("case", list(HEAD_ABUSE))
def test_giant_request_heads_are_refused_quickly(target: Target, case: str) -> None:
    if case == "request_line_64kib":
        payload = b"POST /v1/offers/pull?" + b"a" * 65536 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    else:
        payload = _head(token=target.agent.token) + HEAD_ABUSE[case]
    with tls_socket(target.port, target.agent.ctx, timeout=10) as sock:
        started = time.monotonic()
        try:
            sock.sendall(payload)
        except (ConnectionError, ssl.SSLError):
            pass  # refused before we finished sending: fine
        data, _ = _read_until_closed(sock, DEADLINE_S + SLACK_S)
        elapsed = time.monotonic() - started
    assert elapsed < SLACK_S, elapsed  # no deadline needed: refused on sight
    if data:  # a 4xx envelope, or (reset mid-send) nothing at all
        status, doc = _status_and_doc(data)
        assert 400 <= status < 500 and doc["schema"] == "qinglong/error@v1", (status, doc)


# ------------------------------------------------------------------ slowloris

# One byte every 250 ms per connection: as slow as a slowloris needs to be to
# look alive (1,000 one-byte TLS records a second across the attack).
DRIP_S = 0.25
HEAD_DRIP = (
    b"POST /v1/offers/pull HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nX-Pad: " + b"p" * 2000
)


async def _attack(
    port: int,
    ca_file: str,
    cert: tuple[str, str],
    n_tls: int,
    n_tcp: int,
    duration_s: float,
    drip_s: float,
) -> dict[str, Any]:
    """n_tls TLS connections dripping a request head one byte at a time and n_tcp
    plain TCP connections that never send a ClientHello; each reconnects as soon
    as the server closes it, for duration_s. Returns per-connection lifetimes."""
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_cert_chain(*cert)
    loop = asyncio.get_running_loop()
    stop_at = loop.time() + duration_s
    closed: dict[str, list[float]] = {"tls": [], "tcp": []}
    failed = {"tls": 0, "tcp": 0}
    open_since: dict[int, tuple[str, float]] = {}

    async def one(kind: str, delay: float) -> None:
        # Spread the first connects over one deadline period, as a tool that opens
        # its sockets in a loop would; reconnects then keep that spread.
        await asyncio.sleep(delay)
        while loop.time() < stop_at:
            try:
                if kind == "tls":
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection(
                            "127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1"
                        ),
                        10,
                    )
                else:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", port), 10
                    )
            except (OSError, TimeoutError, ssl.SSLError):
                failed[kind] += 1
                await asyncio.sleep(0.1)
                continue
            # The deadline starts when the server has the connection: for TLS when
            # the handshake is done (head timer), for TCP at connect (handshake timer).
            born = loop.time()
            key = id(writer)
            open_since[key] = (kind, born)

            async def drip(w: asyncio.StreamWriter = writer) -> None:
                for i in range(len(HEAD_DRIP)):
                    w.write(HEAD_DRIP[i : i + 1])
                    await asyncio.sleep(drip_s)

            dripper = asyncio.create_task(drip()) if kind == "tls" else None
            try:
                while await reader.read(65536):
                    pass
            except (OSError, ssl.SSLError):
                pass
            closed[kind].append(loop.time() - born)
            del open_since[key]
            if dripper is not None:
                dripper.cancel()
            writer.close()

    tasks = [asyncio.create_task(one("tls", DEADLINE_S * i / n_tls)) for i in range(n_tls)]
    tasks += [asyncio.create_task(one("tcp", DEADLINE_S * i / n_tcp)) for i in range(n_tcp)]
    await asyncio.sleep(duration_s)
    now = loop.time()
    still_open = [now - born for _, born in open_since.values()]
    await asyncio.wait(tasks, timeout=DEADLINE_S + SLACK_S * 2)
    for task in tasks:
        task.cancel()
    return {"closed": closed, "failed": failed, "stillOpenAges": still_open}


def _attack_process(
    port: int,
    ca_file: str,
    cert: tuple[str, str],
    n_tls: int,
    n_tcp: int,
    duration_s: float,
    out: str,
) -> None:
    """Entry point of the attacker process (its own interpreter: the attack must
    not steal the measuring client's GIL)."""
    result = asyncio.run(_attack(port, ca_file, cert, n_tls, n_tcp, duration_s, DRIP_S))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpuSeconds"] = usage.ru_utime + usage.ru_stime
    Path(out).write_text(json.dumps(result))


def _latencies(target: Target, n: int, every_s: float = 0.015) -> list[float]:
    """n pulls, one every `every_s` (a polling worker, not a flood: the samples
    span several attack deadline periods), each on a fresh mTLS connection: the
    handshake is the part of a request an attack on the listener can delay."""
    out = []
    target.refresh_session()
    for _ in range(n):
        time.sleep(every_s)
        started = time.perf_counter()
        reply = post(
            target.port,
            "/v1/offers/pull",
            target.pull_body(),
            ctx=target.agent.ctx,
            token=target.agent.token,
        )
        out.append(time.perf_counter() - started)
        assert reply.status == 200 and reply.json["status"] == "idle", reply.body
    return out


def _start_attack(
    target: Target, tmp: Path, duration_s: float, n_tls: int = ATTACK_TLS, n_tcp: int = ATTACK_TCP
) -> tuple[multiprocessing.process.BaseProcess, Path]:
    out = tmp / f"attack-{uuid.uuid4().hex[:6]}.json"
    # The attacker's own certificate: sharing the legitimate worker's would let
    # the per-identity cap shed the worker's own connections.
    cert = target.world.pki.worker_cert(str(uuid.uuid4()), name=f"attacker-{out.stem}")
    process = multiprocessing.get_context("spawn").Process(
        target=_attack_process,
        args=(
            target.port,
            target.world.pki.ca_file,
            (str(cert.cert_file), str(cert.key_file)),
            n_tls,
            n_tcp,
            duration_s,
            str(out),
        ),
        daemon=True,
    )
    process.start()
    return process, out


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_open(target: Target, at_least: int, timeout_s: float) -> float:
    deadline = time.monotonic() + timeout_s
    value = 0.0
    while time.monotonic() < deadline:
        # Every stage holds a connection: hello waits, handshakes, established.
        value = sum(
            target.server.metric(name)
            for name in (
                "qinglong_ingress_open_connections",
                "qinglong_ingress_hello_waits",
                "qinglong_ingress_tls_handshakes_in_progress",
            )
        )
        if value >= at_least:
            return value
        time.sleep(0.1)
    return value


@dataclass
class Round:
    baseline: list[float]
    during: list[float]
    attack: dict[str, Any]
    held: float
    ingress_cpu: float

    @property
    def ratio(self) -> float:
        return percentile(self.during, 99) / percentile(self.baseline, 99)

    def summary(self) -> dict[str, Any]:
        return {
            "baselineP50Ms": round(statistics.median(self.baseline) * 1000, 1),
            "baselineP99Ms": round(percentile(self.baseline, 99) * 1000, 1),
            "attackP50Ms": round(statistics.median(self.during) * 1000, 1),
            "attackP99Ms": round(percentile(self.during, 99) * 1000, 1),
            "p99Ratio": round(self.ratio, 2),
            "held": self.held,
            "closed": {k: len(v) for k, v in self.attack["closed"].items()},
            "maxLifetimeS": {k: round(max(v), 2) for k, v in self.attack["closed"].items()},
            "failedConnects": self.attack["failed"],
            "ingressCpuShare": round(self.ingress_cpu, 2),
            "attackerCpuSeconds": round(self.attack["cpuSeconds"], 1),
        }


def _round(target: Target, tmp: Path) -> Round:
    """Baseline pulls, then the same number of pulls during a 500-connection attack."""
    baseline = _latencies(target, LEGIT_SAMPLES)
    attacker, out = _start_attack(target, tmp, ATTACK_SECONDS)
    try:
        held = _wait_open(target, ATTACK_TLS + ATTACK_TCP - 60, 2 * ATTACK_RAMP_S)
        pid = target.server.pid
        cpu_before, wall_before = _cpu_seconds(pid), time.monotonic()
        during = _latencies(target, LEGIT_SAMPLES)
        ingress_cpu = (_cpu_seconds(pid) - cpu_before) / (time.monotonic() - wall_before)
    finally:
        attacker.join(ATTACK_SECONDS + 30)
        if attacker.is_alive():
            attacker.kill()
    return Round(baseline, during, json.loads(out.read_text()), held, ingress_cpu)


# Each attack round: ~2 s ramp (connects spread over one deadline period), then
# the legitimate pulls, all while 500 connections are held and recycled.
ATTACK_RAMP_S = DEADLINE_S + 1.0
ATTACK_SECONDS = ATTACK_RAMP_S + LEGIT_SAMPLES * 0.03 + 1.0
ROUNDS = 5 if LONG else 3


def test_slowloris_500_connections(target: Target, tmp_path: Path) -> None:
    """250 mTLS connections dripping a request head one byte at a time plus 250 TCP
    connections that never send a ClientHello, each reconnecting as soon as the
    server drops it. Every one must be dropped at its deadline, the ingress must
    not grow by 20 MB, and legitimate pulls must keep p99 < 2x their baseline.

    The latency comparison is made in ROUNDS rounds (baseline, then attack) and
    the median round ratio is asserted: the box is shared, and one round that
    coincides with someone else's burst is noise, not a property of the ingress.
    Every round is printed (and documented in docs/SECURITY.md)."""
    pid = target.server.pid
    _latencies(target, 20)  # warm up (pool connections, code paths)
    rss_before = read_status_kib(pid, "VmRSS")
    rounds = [_round(target, tmp_path) for _ in range(ROUNDS)]
    time.sleep(DEADLINE_S + SLACK_S)  # every attack connection is gone by now
    rss_after = read_status_kib(pid, "VmRSS")
    report = {
        "rounds": [r.summary() for r in rounds],
        "rssBeforeKiB": rss_before,
        "rssAfterKiB": rss_after,
        "hwmKiB": read_status_kib(pid, "VmHWM"),
        "openAfter": target.server.metric("qinglong_ingress_open_connections"),
        "loadavg": os.getloadavg(),
    }
    print(json.dumps(report))
    limit = DEADLINE_S + SLACK_S
    for r in rounds:
        # The attack really happened: ~500 connections held at once, recycled.
        assert r.held >= ATTACK_TLS + ATTACK_TCP - 60, report
        assert len(r.attack["closed"]["tls"]) >= ATTACK_TLS, report
        assert len(r.attack["closed"]["tcp"]) >= ATTACK_TCP, report
        # Each attack connection was dropped by the server within its deadline.
        assert max(r.attack["closed"]["tls"]) < limit, report
        assert max(r.attack["closed"]["tcp"]) < limit, report
        assert max(r.attack["stillOpenAges"], default=0.0) < limit, report
    assert report["openAfter"] <= 1, report
    assert rss_after - rss_before < 20 * 1024, report
    if statistics.median(r.ratio for r in rounds) >= 2.0:
        # On a shared 2-core box a noisy neighbour can inflate a whole set of
        # rounds; judge on twice as many before calling it a regression.
        rounds += [_round(target, tmp_path) for _ in range(ROUNDS)]
        report["rounds"] = [r.summary() for r in rounds]
    assert statistics.median(r.ratio for r in rounds) < 2.0, report


# ------------------------------------------------------------------ the connection limit

LIMIT = 64


@pytest.fixture(scope="module")
def limited(abuse_world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    yield from _target(abuse_world, tmp_path_factory.mktemp("limited"), maxConnections=LIMIT)


def test_connection_limit_bounds_what_an_attack_can_hold(limited: Target, tmp_path: Path) -> None:
    """The effect of `max_connections` below the attack size: the ingress never
    holds more than the limit (so memory and handshake work are bounded), the
    excess waits in the kernel backlog, and legitimate pulls wait with it — they
    still complete, after at most about (attack / limit + 1) deadline periods.
    This is why the limit is sized above the fleet plus attack headroom rather
    than used as the slowloris defence (the deadlines are that)."""
    pid = limited.server.pid
    limited.refresh_session()
    rss_before = read_status_kib(pid, "VmRSS")
    n_tls = n_tcp = 100
    attacker, out = _start_attack(limited, tmp_path, 8.0, n_tls=n_tls, n_tcp=n_tcp)
    seen: list[float] = []
    waits: list[float] = []
    try:
        deadline = time.monotonic() + 7.0
        while time.monotonic() < deadline:
            seen.append(limited.server.metric("qinglong_ingress_open_connections"))
            if len(seen) % 10 == 5:  # a legitimate pull now and then
                started = time.monotonic()
                reply = post(
                    limited.port,
                    "/v1/offers/pull",
                    limited.pull_body(),
                    ctx=limited.agent.ctx,
                    token=limited.agent.token,
                )
                waits.append(time.monotonic() - started)
                assert reply.status == 200, reply.body
            time.sleep(0.1)
    finally:
        attacker.join(40)
        if attacker.is_alive():
            attacker.kill()
    result = json.loads(out.read_text())
    time.sleep(DEADLINE_S + SLACK_S)
    report = {
        "maxOpen": max(seen),
        "samples": len(seen),
        "legitWaitsS": [round(w, 2) for w in waits],
        "closed": {k: len(v) for k, v in result["closed"].items()},
        "maxClientLifetimeS": {k: round(max(v), 2) for k, v in result["closed"].items()},
        "rssGrowthKiB": read_status_kib(pid, "VmRSS") - rss_before,
    }
    print(json.dumps(report))
    assert LIMIT - 4 <= max(seen) <= LIMIT, report  # saturated, never above
    assert waits and max(waits) < ((n_tls + n_tcp) / LIMIT + 1) * DEADLINE_S + 2 * SLACK_S, report
    assert report["rssGrowthKiB"] < 20 * 1024, report
    assert limited.server.metric("qinglong_ingress_open_connections") <= 1
