"""`bench e2e`: offers through the real path vs the raw claim and PgQueuer.

Every system runs per level (8 and 32 workers/clients; --quick: 8), one after
the other on the same throwaway PostgreSQL cluster, in alternating order per
level (ours, ours at --processes 2, raw, PgQueuer batch 1, PgQueuer batch 10
at 8; the reverse at 32) so none always runs on the warmest cache. The e2e
targets are checked at 32 (--quick checks them at 8: indicative only).

Ours, per level: a fresh migrated database, a dev CA, N worker identities,
**two** `qinglong ingress serve` processes (HTTPS, TLS 1.3, mTLS; workers
alternate between them) and N `qinglong worker run` processes polling an empty
queue. Once every session is open, `offers` runs are enqueued in one call; the
burst ends when every offer sits validated and fsynced in a worker's inbox.
offers/s = offers ÷ (last inbox write - enqueue) — the level's *maximum*;
latency per offer = inbox write (`acceptedAtMs`) - `queuedAtMs`, p50/p99. The
ingresses' /metrics give database calls per request. Server CPU per
delivered offer: user + system time from /proc of the two ingress process trees
and of every PostgreSQL process over the burst (tools/bench/proc_cpu.py), the
workers excluded. The burst runs twice per level, each ingress once with
`--processes 1` and once with `--processes 2` (fresh database and workers each
time; the half-load phase follows the `--processes 1` burst). The worker
processes' CPU is read the same way, for the whole box's CPU per job next to
PgQueuer's (its consumer processes + PostgreSQL): on shared CPUs that sum, not
one component, bounds a system's jobs/s. Right after ours, the journal floor
(tools/bench/journal_floor.py) makes the file operations the worker's claim
journal must make per offer, in as many processes, with nothing else: the part
of the workers' CPU the durable journal itself costs on this host.

Half load (largest level only, same processes, right after the burst): a
feeder enqueues small batches every 50 ms at 50 % of the burst's offers/s. After
a warm-up, /metrics of both ingresses are read at the start and the end of a
window; their difference gives the ingress-side pull latency (the pull route's
request-duration histogram: every pull, offered or idle), requests served and
full TLS handshakes (`qinglong_ingress_tls_handshakes_total`). Offers enqueued
inside the window give enqueue → inbox latency. Runs fed are capped so no
session reaches its 256 live leases (the workers do not execute).

Raw, per level: `qlbench.claim` (bench/raw.py — SELECT … FOR UPDATE SKIP
LOCKED + update + event, one call per job) from N client threads, each on its
own connection, draining a fresh database of `raw_jobs` jobs, as `bench sql`
does; PostgreSQL's CPU per claim is read the same way.

PgQueuer, per level, twice: a fresh database with PgQueuer's schema, N consumer
processes (`tools.bench.pgq_consumer`: PgQueuer's QueueManager) waiting on
LISTEN/NOTIFY; the same number of jobs as offers enqueued in one call;
latency = handler start - job `created`. Once with `batch_size=1` (one job per
dequeue) and once with `batch_size=10` (PgQueuer's default). PgQueuer runs on
its asyncpg driver when asyncpg is importable (see `pgq_driver`: its psycopg
driver adds up to 1 s per wake-up, which would flatter ours); the table says which.

PgQueuer is not a dependency: the full run installs `pgqueuer[asyncpg]` with
pip into the current environment when PgQueuer or asyncpg is missing (and says
so); --quick never installs, and reports "not measured" for PgQueuer unless it
is importable (then on whichever driver is).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from qinglong.demo import Child, pki_ca_cert, spawn, stop_children
from tools.bench.common import Table, fmt_ratio, histogram_quantile, percentile, ratio
from tools.bench.journal_floor import journal_floor
from tools.bench.proc_cpu import CpuMeter, postmaster_pid


@dataclass(frozen=True)
class Sizes:
    levels: tuple[int, ...]
    offers: int  # per burst, ours and each PgQueuer run
    raw_jobs: int  # drained by the raw claim per level
    steady_s: float  # half-load window (measured)
    steady_warmup_s: float  # fed before the window opens, so it starts in steady state
    steady_cap_per_worker: int = 100  # runs fed per worker at most (256 leases per session)


FULL = Sizes(levels=(8, 32), offers=2000, raw_jobs=20_000, steady_s=20.0, steady_warmup_s=3.0)
QUICK = Sizes(levels=(8,), offers=160, raw_jobs=600, steady_s=3.0, steady_warmup_s=0.5)
INGRESSES = 2
READY_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 300.0
INGRESS_ROLE = "qinglong_bench_ingress"
POOL_MAX_SIZE = 4  # database connections per ingress
# Each ingress runs one process (`--processes 1`), so the figures stay comparable
# with earlier runs whatever the machine's CPU count.
INGRESS_PROCESSES = 1
PULL_ROUTE = "/v1/offers/pull"
PULL_ROUTES = (PULL_ROUTE, "/v1/offers/pull-batch")
PULL_FUNCTIONS = ("pull_offer", "pull_offers")
RAW_WARMUP = 2  # claims per connection before the clock starts (as bench sql)
FEED_TICK_S = 0.05
STEADY_LOAD = 0.5  # of the burst's offers/s

# The e2e targets (docs/BENCHMARKS.md), at TARGET_WORKERS.
TARGET_WORKERS = 32
TARGET_VS_RAW = 0.40
TARGET_VS_PGQ_ONE = 1.0
TARGET_SERVER_CPU_MS = 1.5  # ingress + PostgreSQL CPU per delivered offer
TARGET_VS_PGQ_BATCH = 1.0
TARGET_PULL_P99_MS = 10.0
TARGET_HANDSHAKES = 0.01


def _wait(predicate: Any, timeout_s: float, what: str, children: list[Child]) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        dead = [c.name for c in children if c.process.poll() is not None]
        if dead:
            raise RuntimeError(f"{what}: {', '.join(dead[:3])} exited")
        time.sleep(0.1)
    raise RuntimeError(f"{what}: not after {timeout_s:.0f}s")


def _read_json(path: Path) -> dict[str, Any] | None:
    with contextlib.suppress(OSError, ValueError):
        value = json.loads(path.read_text(encoding="utf-8"))
        return value if isinstance(value, dict) else None
    return None


# ---------------------------------------------------------------- ingress /metrics


@dataclass
class Scrape:
    """Cumulative counters read from the ingresses' /metrics, summed over them."""

    requests: float = 0.0
    db_calls: float = 0.0
    handshakes: dict[str, float] = field(default_factory=dict)  # outcome -> count
    pull_buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative
    pull_results: dict[str, float] = field(default_factory=dict)
    # The pull_offer database call alone (pool wait included): how much of the
    # pull's time is the database's.
    db_pull_buckets: dict[float, float] = field(default_factory=dict)
    pulls_by_route: dict[str, float] = field(default_factory=dict)  # route -> requests

    def add(self, text: str) -> None:
        # A worker with several free slots pulls in batches (SPEC §18): both routes
        # (and both database calls) are pulls.
        buckets = tuple(
            f'qinglong_ingress_request_duration_seconds_bucket{{route="{route}",le="'
            for route in PULL_ROUTES
        )
        db_buckets = tuple(
            f'qinglong_ingress_db_call_duration_seconds_bucket{{function="{function}",le="'
            for function in PULL_FUNCTIONS
        )
        counts = {
            f'qinglong_ingress_request_duration_seconds_count{{route="{route}"': route
            for route in PULL_ROUTES
        }
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name.startswith("qinglong_ingress_requests_total{"):
                self.requests += float(value)
            elif name.startswith("qinglong_ingress_db_call_duration_seconds_count{"):
                self.db_calls += float(value)
            elif name.startswith('qinglong_ingress_tls_handshakes_total{outcome="'):
                outcome = name.split('"')[1]
                self.handshakes[outcome] = self.handshakes.get(outcome, 0.0) + float(value)
            elif name.startswith(buckets):
                le = float(name.rsplit('le="', 1)[1].split('"', 1)[0].replace("+Inf", "inf"))
                self.pull_buckets[le] = self.pull_buckets.get(le, 0.0) + float(value)
            elif name.startswith('qinglong_ingress_pull_results_total{result="'):
                result = name.split('"')[1]
                self.pull_results[result] = self.pull_results.get(result, 0.0) + float(value)
            elif name.startswith(db_buckets):
                le = float(name.rsplit('le="', 1)[1].split('"', 1)[0].replace("+Inf", "inf"))
                self.db_pull_buckets[le] = self.db_pull_buckets.get(le, 0.0) + float(value)
            elif name.split("}", 1)[0] in counts:
                route = counts[name.split("}", 1)[0]]
                self.pulls_by_route[route] = self.pulls_by_route.get(route, 0.0) + float(value)

    def minus(self, earlier: Scrape) -> Scrape:
        def diff(now: dict[Any, float], then: dict[Any, float]) -> dict[Any, float]:
            return {k: v - then.get(k, 0.0) for k, v in now.items()}

        return Scrape(self.requests - earlier.requests, self.db_calls - earlier.db_calls,
                      diff(self.handshakes, earlier.handshakes),
                      diff(self.pull_buckets, earlier.pull_buckets),
                      diff(self.pull_results, earlier.pull_results),
                      diff(self.db_pull_buckets, earlier.db_pull_buckets),
                      diff(self.pulls_by_route, earlier.pulls_by_route))  # fmt: skip

    @property
    def full_handshakes(self) -> float:
        return self.handshakes.get("full", 0.0)

    @property
    def pulls(self) -> float:
        return self.pull_buckets.get(math.inf, 0.0)

    def pull_quantile_ms(self, q: float) -> float:
        return histogram_quantile(q, sorted(self.pull_buckets.items())) * 1000

    def db_pull_quantile_ms(self, q: float) -> float:
        return histogram_quantile(q, sorted(self.db_pull_buckets.items())) * 1000

    def pulls_within(self, seconds: float) -> float:
        """Fraction of pulls at or below a bucket bound (exact, no interpolation)."""
        return ratio(self.pull_buckets.get(seconds, math.nan), self.pulls)


# ----------------------------------------------------------------------- ours


@dataclass
class Steady:
    """The half-load phase's figures (JSON: `steady`)."""

    workers: int
    maxPerS: float  # the burst's offers/s this load is a fraction of
    ratePerS: float  # fed
    fedRuns: int
    windowS: float
    deliveredPerS: float  # offers that reached an inbox inside the window, per second
    windowOffers: int  # offers enqueued inside the window (their latency below)
    inboxP50Ms: float
    inboxP99Ms: float
    pulls: int
    pullResults: dict[str, float]
    pullP50Ms: float
    pullP99Ms: float
    pullsWithin10Ms: float  # fraction, from the histogram's 10 ms bucket
    dbPullP50Ms: float  # the pull_offer database call inside those pulls
    dbPullP99Ms: float
    requests: int
    tlsHandshakes: int  # full handshakes
    tlsHandshakesFailed: int
    handshakeFraction: float
    capped: bool  # the window was shortened to stay under the lease cap


class OursLevel:
    """One level of the real path: database, identities, 2 ingresses, N workers."""

    def __init__(self, cluster: Any, root: Path, workers: int, offers: int,
                 processes: int = INGRESS_PROCESSES) -> None:  # fmt: skip
        self.cluster, self.root, self.workers, self.offers = cluster, root, workers, offers
        self.processes = processes  # `ingress serve --processes` of each ingress
        self.db = f"ql_e2e_{os.getpid()}_{workers}_{processes}"
        self.run_dir = root / f"l{workers}-p{processes}"  # identities, journals, logs
        self.children: list[Child] = []
        self.ingresses: list[dict[str, Any]] = []
        self.journals: list[Path] = []
        self.task_id: str | None = None

    def setup(self) -> None:
        from qinglong.db.migrator import migrate
        from qinglong.service import control_plane, pki

        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.dsn = self.cluster.create_database(self.db)
        migrate(self.dsn)
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s",
                            (INGRESS_ROLE,)).fetchone() is None:  # fmt: skip
                conn.execute(f"CREATE ROLE {INGRESS_ROLE} LOGIN IN ROLE ql_worker_ingress")
        ca_dir = self.root / "ca"
        if not ca_dir.exists():
            pki.init_ca(ca_dir)
            pki.issue_server_cert(ca_dir, self.root / "server")
        with control_plane.connect(self.dsn) as conn:
            self.idents = [
                control_plane.provision_worker(conn, f"e2e-{i}", ca_dir,
                                               self.run_dir / f"w{i}")
                for i in range(self.workers)
            ]  # fmt: skip

    def start_ingresses(self) -> None:
        for index in range(INGRESSES):
            ready = self.run_dir / f"ingress-{index}.ready"
            config = {
                "dsn": self.cluster.dsn(self.db, user=INGRESS_ROLE),
                "certFile": str(self.root / "server" / "server.pem"),
                "keyFile": str(self.root / "server" / "server-key.pem"),
                "clientCaFile": str(pki_ca_cert(self.root / "ca")),
                "port": 0, "adminPort": 0, "poolMaxSize": POOL_MAX_SIZE,
                # Workers pull again right after each offer: no per-worker limiter here.
                "ratePerS": 10000, "rateBurst": 10000,
                "idleRetryAfterMs": 100, "idleJitterMs": 50,
                "auditLog": str(self.root / f"audit-{self.workers}-{index}.log"),
                "readyFile": str(ready), "logLevel": "WARNING",
            }  # fmt: skip
            path = self.run_dir / f"ingress-{index}.json"
            path.write_text(json.dumps(config), encoding="utf-8")
            argv = [
                sys.executable,
                "-m",
                "qinglong",
                "ingress",
                "serve",
                "--config",
                str(path),
                "--processes",
                str(self.processes),
            ]
            child = spawn(f"ingress-{index}", argv, self.run_dir / f"ingress-{index}.log")
            self.children.append(child)
            self.ingresses.append(_wait(lambda r=ready: _read_json(r), READY_TIMEOUT_S,
                                        "ingress ready", self.children))  # fmt: skip

    def start_workers(self) -> None:
        for index, ident in enumerate(self.idents):
            journal = self.run_dir / f"journal-{index}"
            self.journals.append(journal)
            config = {
                "ingressUrl": self.ingresses[index % INGRESSES]["ingressUrl"],
                "workerId": ident.worker_id, "certFile": str(ident.cert_file),
                "keyFile": str(ident.key_file), "caFile": str(pki_ca_cert(self.root / "ca")),
                "credentialFile": str(ident.credential_file), "journal": str(journal),
                "capabilities": {"schema": "qinglong/worker-capabilities@v1",
                                 "executors": ["remote-worker"], "labels": {}, "runtimes": {},
                                 "slots": 256},
                "cadence": {"idlePollMs": 100, "jitterMs": 50}, "inboxCapacity": 1024,
            }  # fmt: skip
            path = journal.with_suffix(".json")
            path.write_text(json.dumps(config), encoding="utf-8")
            argv = [sys.executable, "-m", "qinglong", "worker", "run", "--config", str(path)]
            self.children.append(
                spawn(f"worker-{index}", argv, self.run_dir / f"worker-{index}.log")
            )

    def sessions_open(self) -> bool:
        from qinglong.status_cli import fetch_snapshot

        return int(fetch_snapshot(self.dsn)["sessions"]["active"]) >= self.workers

    def inbox(self) -> list[dict[str, Any]]:
        entries = []
        for journal in self.journals:
            for path in (journal / "inbox").glob("*.json"):
                entry = _read_json(path)
                if entry is not None and "acceptedAtMs" in entry:
                    entries.append(entry)
        return entries

    def inbox_count(self) -> int:
        """Entries published so far, by name only: polled while the system is measured,
        so it must not parse thousands of files (temporaries are `.tmp-*`)."""
        count = 0
        for journal in self.journals:
            with contextlib.suppress(FileNotFoundError), os.scandir(journal / "inbox") as it:
                count += sum(1 for e in it if e.name.endswith(".json")
                             and not e.name.startswith("."))  # fmt: skip
        return count

    def scrape(self) -> Scrape:
        scrape = Scrape()
        for ingress in self.ingresses:
            # Under --processes N every process has its own /metrics.
            for admin_url in ingress.get("adminUrls", [ingress["adminUrl"]]):
                with urllib.request.urlopen(f"{admin_url}/metrics", timeout=5) as resp:
                    scrape.add(resp.read().decode())
        return scrape

    def metrics(self) -> dict[str, float]:
        scrape = self.scrape()
        return {"requests": scrape.requests, "dbCalls": scrape.db_calls}

    def measure(self) -> dict[str, Any]:
        """The burst: `offers` runs enqueued at once; the level's maximum offers/s."""
        from qinglong.db import api
        from qinglong.service import control_plane
        from qinglong.service.compiler import compile_command

        _wait(self.sessions_open, READY_TIMEOUT_S, "worker sessions", self.children)
        doc = {"schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 60}
        with control_plane.connect(self.dsn) as conn:
            self.task_id = control_plane.run(
                conn,
                api.publish_revision(
                    project="e2e", task="t", canonical=compile_command(doc).canonical
                ),
            ).task_id
            before = self.scrape()
            # Server CPU: the ingress process trees and every PostgreSQL process,
            # workers excluded (they are the clients).
            ingress_cpu = CpuMeter(tuple(c.process.pid for c in self.children
                                         if c.name.startswith("ingress-")))  # fmt: skip
            pg_cpu = CpuMeter((postmaster_pid(self.cluster.data_dir),))
            # The clients' side too, for the whole box's CPU per job (the "why" of
            # a ratio on shared CPUs): every worker process.
            worker_cpu = CpuMeter(tuple(c.process.pid for c in self.children
                                        if c.name.startswith("worker-")))  # fmt: skip
            for meter in (ingress_cpu, pg_cpu, worker_cpu):
                meter.start()
            started_ms = time.time() * 1000
            control_plane.enqueue_runs(conn, self.task_id, 0, self.offers)
        _wait(lambda: self.inbox_count() >= self.offers, DRAIN_TIMEOUT_S, "offers delivered",
              self.children)  # fmt: skip
        ingress_s, pg_s, worker_s = ingress_cpu.stop(), pg_cpu.stop(), worker_cpu.stop()
        entries = self.inbox()
        sizes = [p.stat().st_size for j in self.journals for p in (j / "inbox").glob("*.json")]
        accepted = [float(e["acceptedAtMs"]) for e in entries]
        latencies = [(float(e["acceptedAtMs"]) - float(e["offer"]["candidate"]["queuedAtMs"]))
                     / 1000 for e in entries]  # fmt: skip
        wall = (max(accepted) - started_ms) / 1000
        scrape = self.scrape()
        burst = scrape.minus(before)
        per_offer = 1000 / max(len(entries), 1)
        return {"workers": self.workers, "processes": self.processes,
                "offers": len(entries), "wallS": wall,
                "ingressCpuMsPerOffer": ingress_s * per_offer,
                "pgCpuMsPerOffer": pg_s * per_offer,
                "serverCpuMsPerOffer": (ingress_s + pg_s) * per_offer,
                "workerCpuMsPerOffer": worker_s * per_offer,
                "inboxEntryBytes": round(sum(sizes) / max(len(sizes), 1)),
                "boxCpuMsPerOffer": (ingress_s + pg_s + worker_s) * per_offer,
                "firstMs": min(accepted) - started_ms,
                "perS": len(entries) / wall, "p50Ms": percentile(latencies, 50) * 1000,
                "p99Ms": percentile(latencies, 99) * 1000,
                "dbCallsPerRequest": ratio(scrape.db_calls, scrape.requests),
                "requests": scrape.requests,
                "tlsHandshakes": scrape.full_handshakes,
                # Where a worker's offer-to-offer cycle goes (the "why" of a missed ratio).
                "cycleMs": self.workers / (len(entries) / wall) * 1000,
                "pullP50Ms": burst.pull_quantile_ms(0.50),
                # Whether the workers batch (SPEC §18): pulls per route in the burst,
                # and offers per pull request (1 at most for single pulls).
                "pullsByRoute": burst.pulls_by_route,
                "offersPerPull": ratio(len(entries), burst.pulls),
                "dbPullP50Ms": burst.db_pull_quantile_ms(0.50)}  # fmt: skip

    def steady(self, max_per_s: float, sizes: Sizes) -> Steady:
        """Half load: feed runs at STEADY_LOAD * max_per_s in small batches on a timer."""
        from qinglong.service import control_plane

        assert self.task_id is not None, "measure() first: it publishes the task"
        rate = max(STEADY_LOAD * max_per_s, 1.0)
        already = self.inbox_count()
        cap = sizes.steady_cap_per_worker * self.workers
        total_s = sizes.steady_warmup_s + sizes.steady_s
        capped = rate * total_s > cap
        if capped:  # keep the proportions of warm-up and window, shorter
            total_s = cap / rate
        warmup_s = total_s * sizes.steady_warmup_s / (sizes.steady_warmup_s + sizes.steady_s)
        sent = 0
        with control_plane.connect(self.dsn) as conn:
            started = time.monotonic()
            before: Scrape | None = None
            window_ms = (math.nan, math.nan)
            tick = 0
            while True:
                now = time.monotonic() - started
                if before is None and now >= warmup_s:
                    before, window_ms = self.scrape(), (time.time() * 1000, math.nan)
                if now >= total_s:
                    break
                # Catch up to the schedule, whatever the previous tick cost.
                due = math.floor(rate * now) + 1 - sent
                if due > 0:
                    control_plane.enqueue_runs(conn, self.task_id, 0, due)
                    sent += due
                tick += 1
                time.sleep(max(0.0, started + tick * FEED_TICK_S - time.monotonic()))
            after = self.scrape()
            window_ms = (window_ms[0], time.time() * 1000)
        assert before is not None
        _wait(lambda: self.inbox_count() >= already + sent, DRAIN_TIMEOUT_S,
              "half-load offers delivered", self.children)  # fmt: skip
        window = after.minus(before)
        window_s = (window_ms[1] - window_ms[0]) / 1000
        inside = [
            e
            for e in self.inbox()
            if window_ms[0] <= float(e["offer"]["candidate"]["queuedAtMs"]) < window_ms[1]
        ]
        latencies = [(float(e["acceptedAtMs"]) - float(e["offer"]["candidate"]["queuedAtMs"]))
                     / 1000 for e in inside]  # fmt: skip
        delivered = sum(
            1 for e in self.inbox() if window_ms[0] <= float(e["acceptedAtMs"]) < window_ms[1]
        )
        return Steady(
            workers=self.workers, maxPerS=max_per_s, ratePerS=rate, fedRuns=sent,
            windowS=window_s, deliveredPerS=delivered / window_s if window_s > 0 else math.nan,
            windowOffers=len(inside), inboxP50Ms=percentile(latencies, 50) * 1000,
            inboxP99Ms=percentile(latencies, 99) * 1000, pulls=int(window.pulls),
            pullResults=window.pull_results, pullP50Ms=window.pull_quantile_ms(0.50),
            pullP99Ms=window.pull_quantile_ms(0.99),
            pullsWithin10Ms=window.pulls_within(TARGET_PULL_P99_MS / 1000),
            dbPullP50Ms=window.db_pull_quantile_ms(0.50),
            dbPullP99Ms=window.db_pull_quantile_ms(0.99),
            requests=int(window.requests), tlsHandshakes=int(window.full_handshakes),
            tlsHandshakesFailed=int(window.handshakes.get("failed", 0.0)),
            handshakeFraction=ratio(window.full_handshakes, window.requests), capped=capped,
        )  # fmt: skip

    def teardown(self) -> None:
        workers = [c for c in self.children if c.name.startswith("worker-")]
        stop_children(workers)
        stop_children([c for c in self.children if c not in workers])
        with contextlib.suppress(Exception):
            self.cluster.drop_database(self.db)


def _ours(
    cluster: Any,
    root: Path,
    workers: int,
    sizes: Sizes,
    steady: bool,
    processes: int = INGRESS_PROCESSES,
) -> tuple[dict[str, Any], Steady | None]:
    level = OursLevel(cluster, root, workers, sizes.offers, processes)
    try:
        level.setup()
        level.start_ingresses()
        level.start_workers()
        burst = level.measure()
        half = level.steady(burst["perS"], sizes) if steady else None
        return burst, half
    finally:
        level.teardown()


# ------------------------------------------------------------------------ raw


def _raw(cluster: Any, clients: int, jobs: int) -> dict[str, Any]:
    import psycopg

    from tools.bench import raw
    from tools.bench.common import vacuum

    db = f"ql_raw_{os.getpid()}_{clients}"
    dsn = cluster.create_database(db)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            raw.install(conn)
            raw.enqueue(conn, jobs + RAW_WARMUP * clients)
        vacuum(dsn)
        # PostgreSQL's CPU for the drain (its connections' start and warm-up claims
        # included: a little above the claim's own cost).
        pg_cpu = CpuMeter((postmaster_pid(cluster.data_dir),))
        pg_cpu.start()
        timings = raw.drain(dsn, clients, RAW_WARMUP, on_drained=pg_cpu.stop)
        pg_s = pg_cpu.seconds
    finally:
        with contextlib.suppress(Exception):
            cluster.drop_database(db)
    return {
        "clients": clients,
        **timings.summary(),
        "pgCpuMsPerClaim": 1000 * pg_s / max(timings.count, 1),
    }


# ------------------------------------------------------------------- PgQueuer


def pgq_driver() -> str:
    """PgQueuer's asyncpg driver when importable. Its psycopg driver waits for
    NOTIFY inside `notifies(timeout=1.0)` holding the connection lock, so every
    wake-up and many dequeues cost up to 1 s (measured: first job 1.0 s after the
    enqueue vs 0.04 s with asyncpg) — a handicap of the driver, not of PgQueuer."""
    return "asyncpg" if importlib.util.find_spec("asyncpg") is not None else "psycopg"


def ensure_pgqueuer(quick: bool) -> str | None:
    """None when importable; otherwise why PgQueuer is not measured."""
    have_pgq = importlib.util.find_spec("pgqueuer") is not None
    if have_pgq and (quick or pgq_driver() == "asyncpg"):
        return None
    if quick:
        return "PgQueuer is not installed (--quick never installs it)"
    print("bench e2e: installing pgqueuer[asyncpg] with pip into this environment "
          "(bench only, not a dependency)", flush=True)  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                           "pgqueuer[asyncpg]"], capture_output=True, text=True,
                          check=False)  # fmt: skip
    importlib.invalidate_caches()
    if done.returncode != 0 or importlib.util.find_spec("pgqueuer") is None:
        return f"PgQueuer could not be installed: {done.stderr.strip()[-200:]}"
    return None


async def _pgq_setup(dsn: str, jobs: int | None) -> None:
    import psycopg
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import Queries

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        queries = Queries(PsycopgDriver(conn))
        if jobs is None:
            await queries.install()
        else:
            await queries.enqueue(["bench"] * jobs, [b"{}"] * jobs, [0] * jobs)


def _pgq(cluster: Any, root: Path, workers: int, jobs: int, batch: int,
         driver: str) -> dict[str, Any]:  # fmt: skip
    db = f"ql_pgq_{os.getpid()}_{workers}_{batch}"
    dsn = cluster.create_database(db)
    children: list[Child] = []
    outs = [root / f"pgq-{workers}-{batch}-{i}.txt" for i in range(workers)]
    try:
        asyncio.run(_pgq_setup(dsn, None))
        for i, out in enumerate(outs):
            argv = [sys.executable, "-m", "tools.bench.pgq_consumer", dsn, str(out),
                    str(batch), driver]  # fmt: skip
            children.append(spawn(f"pgq-{i}", argv, root / f"pgq-{workers}-{batch}-{i}.log"))
        _wait(
            lambda: all(Path(f"{out}.ready").exists() for out in outs),
            READY_TIMEOUT_S,
            "PgQueuer consumers ready",
            children,
        )
        consumer_cpu = CpuMeter(tuple(c.process.pid for c in children))
        pg_cpu = CpuMeter((postmaster_pid(cluster.data_dir),))
        consumer_cpu.start()
        pg_cpu.start()
        started = time.time()
        asyncio.run(_pgq_setup(dsn, jobs))

        def handled() -> list[tuple[float, float]]:
            rows = []
            for out in outs:
                with contextlib.suppress(OSError):
                    for line in out.read_text().splitlines():
                        done_at, created = line.split()
                        rows.append((float(done_at), float(created)))
            return rows

        _wait(lambda: len(handled()) >= jobs, DRAIN_TIMEOUT_S, "PgQueuer jobs", children)
        consumer_s, pg_s = consumer_cpu.stop(), pg_cpu.stop()
        rows = handled()
    finally:
        stop_children(children)
        with contextlib.suppress(Exception):
            cluster.drop_database(db)
    latencies = [done - created for done, created in rows]
    wall = max(done for done, _ in rows) - started
    return {"workers": workers, "batchSize": batch, "driver": driver, "jobs": len(rows),
            "wallS": wall,
            "perS": len(rows) / wall,
            "firstMs": (min(done for done, _ in rows) - started) * 1000,
            "p50Ms": percentile(latencies, 50) * 1000,
            "p99Ms": percentile(latencies, 99) * 1000,
            "consumerCpuMsPerJob": 1000 * consumer_s / max(len(rows), 1),
            "pgCpuMsPerJob": 1000 * pg_s / max(len(rows), 1),
            "boxCpuMsPerJob": 1000 * (consumer_s + pg_s) / max(len(rows), 1)}  # fmt: skip


# ------------------------------------------------------------------- targets


@dataclass
class Target:
    name: str
    goal: str
    value: float
    met: bool
    figures: str  # what the verdict rests on
    why: str = ""  # one line, when missed

    def note(self, scope: str) -> str:
        verdict = "met" if self.met else "MISSED"
        line = f"target {self.name} ({self.goal}){scope}: {verdict} — {self.figures}"
        return line + (f"; why: {self.why}" if not self.met and self.why else "")


def _ratio_target(name: str, goal: float, ours: dict[str, Any], base: dict[str, Any] | None,
                  base_name: str, why: str) -> Target:  # fmt: skip
    if base is None:
        return Target(name, f"≥ {goal:.2f}x", math.nan, False, f"{base_name} not measured",
                      f"{base_name} did not run")  # fmt: skip
    value = ratio(ours["perS"], base["perS"])
    return Target(name, f"≥ {goal:.2f}x", value, value >= goal,
                  f"ours {ours['perS']:,.0f} offers/s ÷ {base_name} {base['perS']:,.0f}/s = "
                  f"{fmt_ratio(value)}", why)  # fmt: skip


def _box_why(ours: dict[str, Any], pgq: dict[str, Any] | None, nproc: int) -> str:
    """The whole box's CPU per job on both sides, when both were measured."""
    if pgq is None or ours["boxCpuMsPerOffer"] <= 0 or pgq["boxCpuMsPerJob"] <= 0:
        return ""
    return (
        f"; the whole box's CPU per job: ours {ours['boxCpuMsPerOffer']:.2f} ms (workers "
        f"{ours['workerCpuMsPerOffer']:.2f}) vs PgQueuer {pgq['boxCpuMsPerJob']:.2f} ms "
        f"(consumers {pgq['consumerCpuMsPerJob']:.2f}): CPU-bound ceilings "
        f"{nproc * 1000 / ours['boxCpuMsPerOffer']:,.0f} vs "
        f"{nproc * 1000 / pgq['boxCpuMsPerJob']:,.0f} jobs/s on {nproc} CPUs"
    )


def _targets(level: dict[str, Any], steady: Steady) -> list[Target]:
    ours, base = level["ours"], level["raw"]
    nproc = len(os.sched_getaffinity(0))
    workers = level["workers"]
    # The "why" lines name the measured cause a reader can check in the table.
    path = (
        f"each worker takes one offer per {ours['cycleMs']:.0f} ms, of which the ingress "
        f"handles the pull in p50 {ours['pullP50Ms']:.1f} ms, its pull_offer call "
        f"{ours['dbPullP50Ms']:.1f} ms (pool wait included: {INGRESSES}x{POOL_MAX_SIZE} "
        f"database connections serve {workers} workers); the rest is HTTPS + the worker's "
        f"validation and fsynced inbox write; {workers} workers + {INGRESSES} ingresses + "
        f"PostgreSQL share {nproc} CPUs"
    )
    targets = [
        _ratio_target("offers/s vs raw claim", TARGET_VS_RAW, ours, base,
                      f"raw claim at {base['clients']} clients",
                      f"{path}; the raw claim is one SQL call per job "
                      f"(p50 {base['p50Ms']:.1f} ms) from threads of one process"),
        _ratio_target("offers/s vs PgQueuer one at a time", TARGET_VS_PGQ_ONE, ours,
                      level["pgqueuerOne"], "PgQueuer batch 1",
                      f"{path}{_box_why(ours, level['pgqueuerOne'], nproc)}"),
        _ratio_target("offers/s vs PgQueuer batch 10", TARGET_VS_PGQ_BATCH, ours,
                      level["pgqueuer"], "PgQueuer batch 10",
                      f"{path}{_box_why(ours, level['pgqueuer'], nproc)}"),
    ]  # fmt: skip
    results = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(steady.pullResults.items()) if v)
    slow = 1 - steady.pullsWithin10Ms if not math.isnan(steady.pullsWithin10Ms) else math.nan
    targets.append(
        Target(
            "p99 pull latency at half load",
            f"≤ {TARGET_PULL_P99_MS:.0f} ms",
            steady.pullP99Ms,
            # Exact from the 10 ms bucket, not from the interpolated quantile.
            steady.pullsWithin10Ms >= 0.99,
            f"ingress-side pull p50 {steady.pullP50Ms:.1f} / p99 {steady.pullP99Ms:.1f} ms over "
            f"{steady.pulls:,} pulls ({results}), {steady.pullsWithin10Ms:.1%} within 10 ms, at "
            f"{steady.ratePerS:,.0f} runs/s fed (50 % of {steady.maxPerS:,.0f})",
            f"{slow:.1%} of pulls took > 10 ms inside the ingress; "
            + (
                "the pull_offer database call accounts for it"
                if steady.dbPullP99Ms >= 0.8 * steady.pullP99Ms
                else "the ingress's event loop adds to the database call"
            )
            + f" (call incl. pool wait p50 {steady.dbPullP50Ms:.1f} / p99 "
            f"{steady.dbPullP99Ms:.1f} ms; {workers} workers, {INGRESSES} ingresses and "
            f"PostgreSQL on {nproc} shared CPUs)",
        )
    )
    frac = steady.handshakeFraction
    targets.append(
        Target(
            "full TLS handshakes per request in steady state",
            f"≤ {TARGET_HANDSHAKES:.0%}",
            frac,
            not math.isnan(frac) and frac <= TARGET_HANDSHAKES,
            f"{steady.tlsHandshakes} full handshakes / {steady.requests:,} requests = {frac:.2%}"
            if not math.isnan(frac)
            else "no requests in the window",
            "workers reconnected during the window (keep-alive connections were closed; see "
            "the ingress and worker logs)",
        )
    )
    return targets


# ---------------------------------------------------------------------- report


def _level_order(index: int) -> list[str]:
    order = ["ours", "oursTwo", "raw", "pgqueuerOne", "pgqueuer"]
    order = order if index % 2 == 0 else order[::-1]
    # The journal floor writes entries of the size ours measured: always after it.
    after = order.index("ours") + 1
    return [*order[:after], "journal", *order[after:]]


def run_standalone(quick: bool) -> list[Table]:
    from qinglong.throwaway_postgres import ThrowawayPostgres

    sizes = QUICK if quick else FULL
    missing = ensure_pgqueuer(quick)
    levels: list[dict[str, Any]] = []
    steady: Steady | None = None
    steady_workers = max(sizes.levels)
    cluster = ThrowawayPostgres()
    cluster.start()
    try:
        with tempfile.TemporaryDirectory(prefix="qinglong-bench-e2e-") as tmp:
            root = Path(tmp)
            for index, workers in enumerate(sizes.levels):
                level: dict[str, Any] = {
                    "workers": workers,
                    "pgqueuer": None,
                    "pgqueuerOne": None,
                    "order": _level_order(index),
                }
                for system in level["order"]:
                    if system == "ours":
                        ours, half = _ours(
                            cluster, root, workers, sizes, steady=workers == steady_workers
                        )
                        level["ours"] = ours
                        steady = half or steady
                    elif system == "oursTwo":
                        level["oursTwo"], _ = _ours(
                            cluster, root, workers, sizes, steady=False, processes=2
                        )
                    elif system == "raw":
                        level["raw"] = _raw(cluster, workers, sizes.raw_jobs)
                    elif system == "journal":
                        # The worker's mandated file operations alone, entries of the
                        # size ours just wrote (ours runs first at every level).
                        level["journal"] = journal_floor(
                            workers, sizes.offers, level["ours"]["inboxEntryBytes"], root
                        )
                    elif missing is None:
                        batch = 1 if system == "pgqueuerOne" else 10
                        level[system] = _pgq(
                            cluster, root, workers, sizes.offers, batch, pgq_driver()
                        )
                ours = level["ours"]
                level["ratio"] = (
                    ratio(ours["perS"], level["pgqueuer"]["perS"])
                    if level["pgqueuer"]
                    else math.nan
                )
                level["ratioOne"] = (
                    ratio(ours["perS"], level["pgqueuerOne"]["perS"])
                    if level["pgqueuerOne"]
                    else math.nan
                )
                level["rawRatio"] = ratio(ours["perS"], level["raw"]["perS"])
                levels.append(level)
    finally:
        cluster.cleanup()
    assert steady is not None
    return _tables(sizes, levels, steady, missing, quick)


def _tables(sizes: Sizes, levels: list[dict[str, Any]], steady: Steady, missing: str | None,
            quick: bool) -> list[Table]:  # fmt: skip
    table = Table(
        f"e2e: {sizes.offers:,} offers through 2 ingress processes (mTLS) into worker "
        "inboxes vs the raw SKIP LOCKED claim and PgQueuer's consumer (batch 1 and 10)",
        ["workers", "ours offers/s", "first ms", "p50 ms", "p99 ms", "db calls/request",
         "raw claims/s", "÷ raw", "PgQ x1 jobs/s", "p50 ms", "÷ PgQ x1",
         "PgQ x10 jobs/s", "first ms", "p50 ms", "p99 ms", "÷ PgQ x10"],
    )  # fmt: skip
    for level in levels:
        ours, base = level["ours"], level["raw"]
        one, other = level["pgqueuerOne"], level["pgqueuer"]
        table.rows.append([
            str(level["workers"]), f"{ours['perS']:,.0f}", f"{ours['firstMs']:.0f}",
            f"{ours['p50Ms']:.0f}", f"{ours['p99Ms']:.0f}", f"{ours['dbCallsPerRequest']:.2f}",
            f"{base['perS']:,.0f}", fmt_ratio(level["rawRatio"]),
            f"{one['perS']:,.0f}" if one else "not measured",
            f"{one['p50Ms']:.0f}" if one else "-", fmt_ratio(level["ratioOne"]),
            f"{other['perS']:,.0f}" if other else "not measured",
            f"{other['firstMs']:.0f}" if other else "-",
            f"{other['p50Ms']:.0f}" if other else "-", f"{other['p99Ms']:.0f}" if other else "-",
            fmt_ratio(level["ratio"]),
        ])  # fmt: skip
    table.notes.append(
        "ours = a burst of all offers enqueued at once (the level's maximum offers/s); latency "
        "= enqueue → offer validated and fsynced in a worker inbox (ours) / enqueue → handler "
        "start (PgQueuer), mostly queueing time under the burst; 'first' = enqueue → first "
        f"delivery; raw = qlbench.claim from N client threads draining {sizes.raw_jobs:,} "
        "jobs; ÷ = ours offers/s ÷ theirs; systems run one after the other on one cluster, "
        "order alternating per level ("
        + "; ".join(f"{lv['workers']}: {' → '.join(lv['order'])}" for lv in levels)
        + ")"
    )
    if missing:
        table.notes.append(f"PgQueuer not measured: {missing}")
    else:
        driver = pgq_driver()
        table.notes.append(
            f"PgQueuer 1.6 QueueManager on its {driver} driver, one connection per consumer "
            "process, LISTEN/NOTIFY wake-up; x1 = run(batch_size=1), x10 = run(batch_size=10)"
            + (
                ""
                if driver == "asyncpg"
                else "; WARNING: the psycopg driver adds up to 1 s "
                "per wake-up (asyncpg not installed), so PgQueuer's figures are too low"
            )
        )

    table.notes.append(
        "ours's pulls in the burst (a worker with free slots pulls in batches, SPEC 18.1): "
        + "; ".join(
            f"{lv['workers']} workers: "
            + ", ".join(
                f"{n:,.0f} via {route}"
                for route, n in sorted(lv["ours"].get("pullsByRoute", {}).items())
            )
            + f", {lv['ours'].get('offersPerPull', math.nan):.1f} offers per pull"
            for lv in levels
        )
    )

    target_level = next((lv for lv in levels if lv["workers"] == TARGET_WORKERS), levels[-1])
    scope = (
        ""
        if target_level["workers"] == TARGET_WORKERS
        else (f" [--quick: at {target_level['workers']} workers, not {TARGET_WORKERS}; indicative]")
    )
    targets = _targets(target_level, steady)
    table.notes += [t.note(scope) for t in targets[:3]]

    half = Table(
        f"e2e: half load — {steady.workers} workers, runs fed at 50 % of the burst's "
        f"{steady.maxPerS:,.0f} offers/s in batches every {FEED_TICK_S * 1000:.0f} ms",
        ["measure", "value"],
    )
    results = ", ".join(f"{k} {v:,.0f}" for k, v in sorted(steady.pullResults.items()) if v)
    half.rows = [
        ["runs/s fed (target rate)", f"{steady.ratePerS:,.1f}"],
        ["offers/s delivered in the window", f"{steady.deliveredPerS:,.1f}"],
        ["window (after warm-up)", f"{steady.windowS:.1f} s" + (" (capped)" if steady.capped
                                                               else "")],
        ["runs fed in total", f"{steady.fedRuns:,}"],
        ["pulls in the window", f"{steady.pulls:,} ({results})"],
        ["ingress pull latency p50 / p99", f"{steady.pullP50Ms:.2f} / {steady.pullP99Ms:.2f} ms"],
        ["pulls within 10 ms", f"{steady.pullsWithin10Ms:.2%}"],
        ["pull_offer database call p50 / p99", f"{steady.dbPullP50Ms:.2f} / "
                                               f"{steady.dbPullP99Ms:.2f} ms"],
        ["enqueue → inbox p50 / p99", f"{steady.inboxP50Ms:.0f} / {steady.inboxP99Ms:.0f} ms "
                                      f"({steady.windowOffers:,} offers)"],
        ["requests served in the window", f"{steady.requests:,}"],
        ["full TLS handshakes (failed)", f"{steady.tlsHandshakes} ({steady.tlsHandshakesFailed})"],
        ["full handshakes per request", f"{steady.handshakeFraction:.3%}"],
    ]  # fmt: skip
    half.notes.append(
        "pull latency = the ingress's request-duration histogram for /v1/offers/pull and "
        "/pull-batch (every "
        "pull, offered or idle; buckets 1, 2.5, 5, 10, 25 ms…, quantiles interpolated inside "
        "a bucket), difference of /metrics read at the window's start and end; handshakes "
        'from qinglong_ingress_tls_handshakes_total{outcome="full"} over the same window'
    )
    half.notes += [t.note(scope) for t in targets[3:]]

    cpu = _cpu_table(levels, target_level, scope)
    box = _box_table(levels)
    table.data = {"levels": levels, "measured": True, "pgqueuer": missing is None,
                  "steady": asdict(steady), "targetWorkers": target_level["workers"],
                  "targets": [asdict(t) for t in targets]}  # fmt: skip
    half.data = {"steady": asdict(steady)}
    return [table, half, cpu, box]


def _box_row(workers: int, system: str, run: dict[str, Any] | None, unit: str) -> list[str]:
    if run is None:
        return [str(workers), system, "not measured", "-", "-", "-", "-"]
    clients = run["workerCpuMsPerOffer"] if unit == "offer" else run["consumerCpuMsPerJob"]
    server = run["serverCpuMsPerOffer"] if unit == "offer" else run["pgCpuMsPerJob"]
    total = run["boxCpuMsPerOffer"] if unit == "offer" else run["boxCpuMsPerJob"]
    ceiling = len(os.sched_getaffinity(0)) * 1000 / total if total > 0 else math.nan
    return [
        str(workers),
        system,
        f"{run['perS']:,.0f}",
        f"{clients:.2f}",
        f"{server:.2f}",
        f"{total:.2f}",
        f"{ceiling:,.0f}",
    ]


def _box_table(levels: list[dict[str, Any]]) -> Table:
    """The whole box's CPU per job, side by side: ours (workers + ingresses +
    PostgreSQL) and PgQueuer (consumers + PostgreSQL). On shared CPUs this, not
    a single component, bounds a system's jobs/s."""
    nproc = len(os.sched_getaffinity(0))
    table = Table(
        "e2e: the whole box's CPU per job — clients (our workers / PgQueuer's consumers) "
        "+ server (our ingresses + PostgreSQL / PostgreSQL)",
        ["workers", "system", "jobs/s", "clients ms/job", "server ms/job", "box ms/job",
         f"CPU-bound ceiling on {nproc} CPUs, jobs/s"],
    )  # fmt: skip
    for level in levels:
        workers = level["workers"]
        table.rows.append(_box_row(workers, "ours, --processes 1", level["ours"], "offer"))
        table.rows.append(_box_row(workers, "ours, --processes 2", level.get("oursTwo"), "offer"))
        floor = level.get("journal")
        if floor is not None:
            ceiling = len(os.sched_getaffinity(0)) * 1000 / floor["cpuMsPerOffer"]
            table.rows.append([
                str(workers), "ours: the claim journal alone (floor)", f"{floor['perS']:,.0f}",
                f"{floor['cpuMsPerOffer']:.2f}", "-", f"{floor['cpuMsPerOffer']:.2f}",
                f"{ceiling:,.0f}"])  # fmt: skip
        table.rows.append(_box_row(workers, "PgQueuer x1", level["pgqueuerOne"], "job"))
        table.rows.append(_box_row(workers, "PgQueuer x10", level["pgqueuer"], "job"))
    table.notes.append(
        "CPU = user + system time from /proc over each burst (tools/bench/proc_cpu.py): "
        "ours = the worker processes (HTTPS client, offer validation, the fsynced claim "
        "journal and inbox) + both ingress process trees + every PostgreSQL process; "
        "PgQueuer = its consumer processes + every PostgreSQL process. The enqueue's own "
        "client is not counted on either side. The claim journal alone "
        "(tools/bench/journal_floor.py): the file operations SPEC 6.1/6.3/6.4 make a worker "
        "do per offer (intent: temp + fsync + rename + directory fsync; inbox entry of the "
        "size ours wrote: temp + fsync + link + directory fsync; intent cleared: unlink + "
        "directory fsync, the last ours), in as many processes as workers, nothing else — "
        "the part of the clients' CPU no worker can shed without giving up its durability "
        "(user + system "
        "time of those processes; the kernel's journal thread is not counted on any row). "
        "CPU-bound ceiling = CPUs * 1000 / box "
        "ms/job: the most jobs/s this box could give that system if it did nothing else"
    )
    table.data = {"journalFloor": [lv["journal"] for lv in levels if lv.get("journal")],
                  "box": [
        {"workers": lv["workers"], "system": system, **run}
        for lv in levels
        for system, run in (("ours", lv["ours"]), ("oursTwo", lv.get("oursTwo")),
                            ("pgqueuerOne", lv["pgqueuerOne"]), ("pgqueuer", lv["pgqueuer"]))
        if run]}  # fmt: skip
    return table


def _cpu_table(levels: list[dict[str, Any]], target_level: dict[str, Any],
               scope: str) -> Table:  # fmt: skip
    """Server CPU per delivered offer (ingress trees + PostgreSQL, from /proc), by
    `--processes`, next to PostgreSQL's CPU per raw claim."""
    table = Table(
        "e2e: server CPU per delivered offer (ingress processes + PostgreSQL, workers "
        "excluded) vs PostgreSQL CPU per raw claim",
        ["workers", "--processes", "offers/s", "ingress ms/offer", "PostgreSQL ms/offer",
         "server ms/offer", "raw claim PostgreSQL ms/claim"],
    )  # fmt: skip
    for level in levels:
        for run in (level["ours"], level.get("oursTwo")):
            if run is None:
                continue
            table.rows.append([
                str(level["workers"]), str(run["processes"]), f"{run['perS']:,.0f}",
                f"{run['ingressCpuMsPerOffer']:.2f}", f"{run['pgCpuMsPerOffer']:.2f}",
                f"{run['serverCpuMsPerOffer']:.2f}", f"{level['raw']['pgCpuMsPerClaim']:.2f}",
            ])  # fmt: skip
    ours = target_level["ours"]
    value = ours["serverCpuMsPerOffer"]
    target = Target(
        "server CPU per delivered offer",
        f"≤ {TARGET_SERVER_CPU_MS} ms",
        value,
        value <= TARGET_SERVER_CPU_MS,
        f"{value:.2f} ms at {target_level['workers']} workers, --processes "
        f"{ours['processes']} (ingress {ours['ingressCpuMsPerOffer']:.2f} + PostgreSQL "
        f"{ours['pgCpuMsPerOffer']:.2f}); the raw claim costs PostgreSQL "
        f"{target_level['raw']['pgCpuMsPerClaim']:.2f} ms",
        "the ingress's Python (TLS, HTTP, the request's checks and the offer's JSON) and "
        "the pull's database work per offer; see the two columns",
    )
    table.notes.append(
        "CPU = user + system time from /proc of each ingress's supervisor and processes and "
        "of the postmaster and every process it started (backends, WAL writer, "
        "checkpointer, autovacuum), from the enqueue to the last inbox write; a process "
        "that exits inside the window takes its time with it (none of the serving ones "
        "do). Raw: PostgreSQL's time for the whole drain, its connections' start and "
        "warm-up claims included"
    )
    table.notes.append(target.note(scope))
    table.data = {
        "target": asdict(target),
        "runs": [
            {"workers": lv["workers"], **run}
            for lv in levels
            for run in (lv["ours"], lv.get("oursTwo"))
            if run
        ],
    }
    return table
