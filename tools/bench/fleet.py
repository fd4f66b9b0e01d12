"""`bench fleet`: idle fleets of 1,000 / 2,000 / 5,000 workers over real TLS, driven
from separate processes, against ONE ingress process — what an idle pull costs it.

One throwaway cluster (pg_stat_statements loaded), one migrated database, one
CA; every simulated worker is provisioned as a real one (`provision_worker`:
registered, its own client certificate and credential). One `qinglong ingress
serve --processes 1` with the default cadence (idle answers say retry after
2 s + up to 1 s of jitter; heartbeats every 20 s) and `maxConnections` raised
to hold the fleet's kept-alive connections (the default, 512 per process, is
sized for a fleet spread over several processes). The fleet runs in
DRIVERS separate processes (tools/bench/fleet_driver.py: one asyncio loop
each, hand-written HTTP/1.1 on one TLS 1.3 connection per worker), so the
ingress's CPU is the ingress's alone. Fleets are measured one after the other
on the same ingress (a larger fleet reopens the sessions of the smaller one's
workers); each ramps its connections up over RAMP_S (longer for a larger
fleet: at most RAMP_RATE new connections and session opens a second), runs
WARM_S, then a window of WINDOW_S is measured:

- ingress CPU per idle pull: user + system time of the ingress process tree
  (/proc) over the window ÷ pulls answered in it;
- database calls per idle pull: the ingress's own count (its db-call
  histogram: pool calls) and PostgreSQL's (pg_stat_statements: every top-level
  statement of the ingress's role — idle-view probes included) ÷ pulls;
- WAL bytes per idle pull: pg_current_wal_lsn() over the window ÷ pulls (the
  session heartbeats, batched, are the fleet's only writes);
- pull latency p50/p99 seen by the workers (request written → answer read) and
  inside the ingress (its request-duration histogram).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tools.bench.common import PG_SETTINGS, Table, percentile, ratio
from tools.bench.e2e import Scrape
from tools.bench.proc_cpu import CpuMeter

FULL_SIZES = (1000, 2000, 5000)
QUICK_SIZES = (100,)
DRIVERS = 4
RAMP_S, WARM_S, WINDOW_S = 20.0, 10.0, 30.0
RAMP_RATE = 100.0  # new connections + session opens per second, at most
QUICK_TIMES = (3.0, 3.0, 6.0)
INGRESS_ROLE = "qinglong_bench_ingress"
READY_TIMEOUT_S = 60.0
TARGET_CALLS_PER_PULL = 0.02  # at 2,000 workers
TARGET_CPU_MS_PER_PULL = 0.35
TARGET_WAL_PER_PULL = 0.0


@dataclass
class FleetResult:
    workers: int
    sessionsOpened: int
    pulls: int
    pullsPerS: float
    heartbeats: int
    errors: int
    errorSamples: list[str]
    statuses: dict[str, int]
    ingressCpuMsPerPull: float
    poolCallsPerPull: float
    pgStatementsPerPull: float
    walBytes: int
    walBytesPerPull: float
    clientP50Ms: float
    clientP99Ms: float
    ingressP50Ms: float
    ingressP99Ms: float
    windowS: float


@dataclass
class FloorResult:
    """The same fleet against tools/bench/fleet_floor.py."""

    workers: int
    pulls: int
    pullsPerS: float
    cpuMsPerPull: float
    errors: int
    clientP50Ms: float
    clientP99Ms: float


def _drivers_done(outs: list[Path], drivers: list[Any], timeout_s: float = 120.0) -> None:
    """Every driver wrote its figures (a worker finishes its last wait after the window)."""
    deadline = time.monotonic() + timeout_s
    while not all(o.exists() for o in outs):
        failed = [d.name for d in drivers if d.process.poll() not in (None, 0)]
        if failed or time.monotonic() > deadline:
            raise RuntimeError(f"fleet drivers: {failed or 'timed out'} (see driver-*.log)")
        time.sleep(0.2)


class Fleet:
    """The cluster, the ingress and the provisioned identities, shared by all sizes."""

    def __init__(self, root: Path, workers: int) -> None:
        from qinglong.throwaway_postgres import ThrowawayPostgres

        self.root, self.size = root, workers
        self.cluster = ThrowawayPostgres(settings=dict(PG_SETTINGS))
        self.children: list[Any] = []  # the ingress
        self.floor: list[Any] = []  # the floor server
        self.idents: list[dict[str, str]] = []

    def setup(self) -> None:
        import psycopg

        from qinglong.db.migrator import migrate
        from qinglong.service import control_plane, pki

        self.cluster.start()
        self.dsn = self.cluster.create_database("ql_fleet")
        migrate(self.dsn)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute(f"CREATE ROLE {INGRESS_ROLE} LOGIN IN ROLE ql_worker_ingress")
        self.ca_dir = self.root / "ca"
        pki.init_ca(self.ca_dir)
        pki.issue_server_cert(self.ca_dir, self.root / "server")
        with control_plane.connect(self.dsn) as conn:
            for i in range(self.size):
                w = control_plane.provision_worker(conn, f"fleet-{i}", self.ca_dir,
                                                   self.root / "w" / str(i))  # fmt: skip
                self.idents.append({"workerId": w.worker_id, "certFile": str(w.cert_file),
                                    "keyFile": str(w.key_file),
                                    "credentialFile": str(w.credential_file)})  # fmt: skip

    def start_ingress(self) -> None:
        from qinglong.demo import pki_ca_cert, spawn
        from tools.bench.e2e import _read_json, _wait

        ready = self.root / "ingress.ready"
        config = {
            "dsn": self.cluster.dsn("ql_fleet", user=INGRESS_ROLE),
            "certFile": str(self.root / "server" / "server.pem"),
            "keyFile": str(self.root / "server" / "server-key.pem"),
            "clientCaFile": str(pki_ca_cert(self.ca_dir)),
            "port": 0, "adminPort": 0, "readyFile": str(ready), "logLevel": "WARNING",
            "auditLog": str(self.root / "audit.log"),
            "maxConnections": self.size + 256,
        }  # fmt: skip
        path = self.root / "ingress.json"
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
            "1",
        ]
        self.children.append(spawn("ingress", argv, self.root / "ingress.log"))
        self.urls = _wait(lambda: _read_json(ready), READY_TIMEOUT_S, "ingress ready",
                          self.children)  # fmt: skip

    def scrape(self) -> Scrape:
        scrape = Scrape()
        for admin_url in self.urls.get("adminUrls", [self.urls["adminUrl"]]):
            with urllib.request.urlopen(f"{admin_url}/metrics", timeout=10) as resp:
                scrape.add(resp.read().decode())
        return scrape

    def db_counters(self) -> tuple[int, int]:
        """(WAL position in bytes, top-level statements of the ingress role so far)."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint,"
                " (SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements s"
                "   JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = %s)",
                (INGRESS_ROLE,)).fetchone()  # fmt: skip
        assert row is not None
        return int(row[0]), int(row[1])

    def start_floor(self) -> None:
        """The floor server (tools/bench/fleet_floor.py) on the ingress's TLS files."""
        from qinglong.demo import pki_ca_cert, spawn
        from tools.bench.e2e import _read_json, _wait

        ready = self.root / "floor.ready"
        path = self.root / "floor.json"
        path.write_text(json.dumps({
            "certFile": str(self.root / "server" / "server.pem"),
            "keyFile": str(self.root / "server" / "server-key.pem"),
            "clientCaFile": str(pki_ca_cert(self.ca_dir)), "readyFile": str(ready)}),
            encoding="utf-8")  # fmt: skip
        self.floor.append(spawn("floor", [sys.executable, "-m", "tools.bench.fleet_floor",
                                          str(path)], self.root / "floor.log"))  # fmt: skip
        self.floor_url = _wait(lambda: _read_json(ready), READY_TIMEOUT_S, "floor ready",
                               self.floor)["ingressUrl"]  # fmt: skip

    def _drivers(self, workers: int, times: tuple[float, float, float], url: str,
                 tag: str) -> tuple[list[Any], list[Path], tuple[float, float]]:  # fmt: skip
        """DRIVERS driver processes for the first `workers` identities against `url`."""
        from qinglong.demo import pki_ca_cert, spawn

        ramp_s, warm_s, window_s = times
        # Connections (and session opens) arrive at most RAMP_RATE a second.
        ramp_s = max(ramp_s, workers / RAMP_RATE)
        host, port = url.removeprefix("https://").rsplit(":", 1)
        start = time.time() + 2.0  # the drivers' interpreters start meanwhile
        window = (start + ramp_s + warm_s, start + ramp_s + warm_s + window_s)
        drivers, outs = [], []
        for d in range(DRIVERS):
            share = self.idents[d:workers:DRIVERS]
            spec = {
                "host": host.strip("[]"),
                "port": int(port),
                "caFile": str(pki_ca_cert(self.ca_dir)),
                "workers": share,
                "rampS": ramp_s,
                "windowStart": window[0],
                "windowEnd": window[1],
            }
            stem = f"driver-{tag}{workers}-{d}"
            spec_path = self.root / f"{stem}.json"
            spec_path.write_text(json.dumps(spec), encoding="utf-8")
            outs.append(self.root / f"{stem}.out.json")
            drivers.append(spawn(f"driver-{d}", [sys.executable, "-m",
                                 "tools.bench.fleet_driver", str(spec_path), str(outs[-1])],
                                 self.root / f"{stem}.log"))  # fmt: skip
        return drivers, outs, window

    def run_size(self, workers: int, times: tuple[float, float, float]) -> FleetResult:
        from qinglong.demo import stop_children

        drivers, outs, window = self._drivers(workers, times, self.urls["ingressUrl"], "")
        try:
            time.sleep(max(0.0, window[0] - time.time()))
            cpu = CpuMeter(tuple(c.process.pid for c in self.children))
            before, (wal0, stmts0) = self.scrape(), self.db_counters()
            cpu.start()
            time.sleep(max(0.0, window[1] - time.time()))
            cpu_s = cpu.stop()
            after, (wal1, stmts1) = self.scrape(), self.db_counters()
            _drivers_done(outs, drivers)
        finally:
            stop_children(drivers)
        return self._result(workers, outs, after.minus(before), cpu_s,
                            wal1 - wal0, stmts1 - stmts0, times[2])  # fmt: skip

    def run_floor(self, workers: int, times: tuple[float, float, float]) -> FloorResult:
        """The same fleet against the floor server: pulls counted by the drivers."""
        from qinglong.demo import stop_children

        drivers, outs, window = self._drivers(workers, times, self.floor_url, "floor-")
        try:
            time.sleep(max(0.0, window[0] - time.time()))
            cpu = CpuMeter(tuple(c.process.pid for c in self.floor))
            cpu.start()
            time.sleep(max(0.0, window[1] - time.time()))
            cpu_s = cpu.stop()
            _drivers_done(outs, drivers)
        finally:
            stop_children(drivers)
        docs = [json.loads(o.read_text(encoding="utf-8")) for o in outs]
        latencies = [ms for d in docs for ms in d["pullMs"]]
        pulls = len(latencies)
        return FloorResult(workers=workers, pulls=pulls, pullsPerS=pulls / times[2],
                           cpuMsPerPull=1000 * cpu_s / pulls if pulls else math.nan,
                           errors=sum(d["errorCount"] for d in docs),
                           clientP50Ms=percentile(latencies, 50),
                           clientP99Ms=percentile(latencies, 99))  # fmt: skip

    def _result(self, workers: int, outs: list[Path], window: Scrape, cpu_s: float,
                wal: int, statements: int, window_s: float) -> FleetResult:  # fmt: skip
        docs = [json.loads(o.read_text(encoding="utf-8")) for o in outs]
        latencies = [ms for d in docs for ms in d["pullMs"]]
        statuses: dict[str, int] = {}
        for d in docs:
            for key, value in d["statuses"].items():
                statuses[key] = statuses.get(key, 0) + value
        pulls = int(window.pulls)
        return FleetResult(
            workers=workers,
            sessionsOpened=sum(d["opened"] for d in docs),
            pulls=pulls,
            pullsPerS=pulls / window_s,
            heartbeats=sum(d["heartbeats"] for d in docs),
            errors=sum(d["errorCount"] for d in docs),
            errorSamples=sorted({e for d in docs for e in d["errors"]})[:10],
            statuses=statuses,
            ingressCpuMsPerPull=1000 * cpu_s / pulls if pulls else math.nan,
            poolCallsPerPull=ratio(window.db_calls, pulls),
            pgStatementsPerPull=ratio(max(statements, 0), pulls),
            walBytes=wal,
            walBytesPerPull=ratio(wal, pulls),
            clientP50Ms=percentile(latencies, 50),
            clientP99Ms=percentile(latencies, 99),
            ingressP50Ms=window.pull_quantile_ms(0.50),
            ingressP99Ms=window.pull_quantile_ms(0.99),
            windowS=window_s,
        )

    def teardown(self) -> None:
        from qinglong.demo import stop_children

        stop_children(self.children + self.floor)
        self.cluster.cleanup()


def run_standalone(quick: bool) -> list[Table]:
    sizes = QUICK_SIZES if quick else FULL_SIZES
    times = QUICK_TIMES if quick else (RAMP_S, WARM_S, WINDOW_S)
    with tempfile.TemporaryDirectory(prefix="qinglong-bench-fleet-") as tmp:
        fleet = Fleet(Path(tmp), max(sizes))
        try:
            fleet.setup()
            fleet.start_ingress()
            fleet.start_floor()
            results, floors = [], []
            for n in sizes:
                results.append(fleet.run_size(n, times))
                floors.append(fleet.run_floor(n, times))
        finally:
            fleet.teardown()
    return [_table(results, floors, quick)]


def _table(results: list[FleetResult], floors: list[FloorResult], quick: bool) -> Table:
    table = Table(
        "fleet: idle workers over real TLS (separate driver processes) against one ingress "
        "process, default cadence",
        ["workers", "pulls/s", "ingress CPU ms/pull", "pool calls/pull", "PG statements/pull",
         "WAL bytes/pull", "client p50/p99 ms", "ingress p50/p99 ms", "errors"],
    )  # fmt: skip
    for r in results:
        table.rows.append([
            f"{r.workers:,}", f"{r.pullsPerS:,.0f}", f"{r.ingressCpuMsPerPull:.3f}",
            f"{r.poolCallsPerPull:.4f}", f"{r.pgStatementsPerPull:.4f}",
            f"{r.walBytesPerPull:.1f}", f"{r.clientP50Ms:.1f} / {r.clientP99Ms:.1f}",
            f"{r.ingressP50Ms:.1f} / {r.ingressP99Ms:.1f}", str(r.errors),
        ])  # fmt: skip
    for f in floors:
        table.rows.append([
            f"{f.workers:,} floor", f"{f.pullsPerS:,.0f}", f"{f.cpuMsPerPull:.3f}", "—", "—",
            "—", f"{f.clientP50Ms:.1f} / {f.clientP99Ms:.1f}", "—", str(f.errors),
        ])  # fmt: skip
    table.notes.append(
        "floor rows: the same drivers against tools/bench/fleet_floor.py, a minimal aiohttp "
        "app on the ingress's TLS 1.3 context answering fixed documents (body read and "
        "parsed, nothing else) — the framework's and TLS's own CPU per request here; "
        "the ingress's own work per idle pull = its row minus the floor: "
        + ", ".join(
            f"{r.ingressCpuMsPerPull - f.cpuMsPerPull:.3f} ms at {r.workers:,}"
            for r, f in zip(results, floors, strict=True)
        )
    )
    table.notes.append(
        f"{DRIVERS} driver processes (asyncio, one TLS 1.3 connection and client certificate "
        "per worker); the ingress is `--processes 1`; window "
        f"{results[0].windowS:.0f} s after the ramp and warm-up; CPU of the ingress process "
        "tree from /proc; PG statements = pg_stat_statements calls of the ingress's role "
        "(idle-view probes included; this reading's own connection is not the ingress's "
        "role); WAL over the window includes the batched session heartbeats, the fleet's "
        "only writes; pulls/s = pulls the ingress answered in the window, whatever the "
        "status; errors = the workers' failed requests over the whole run, ramp included"
    )
    at = next((r for r in results if r.workers == 2000), results[-1])
    scope = "" if at.workers == 2000 else f" [at {at.workers:,} workers, not 2,000; indicative]"
    table.notes.append(
        f"target ≤ {TARGET_CALLS_PER_PULL} database calls per idle pull at 2,000 workers"
        f"{scope}: "
        + ("met" if at.pgStatementsPerPull <= TARGET_CALLS_PER_PULL else "MISSED")
        + f" — {at.pgStatementsPerPull:.4f} statements ({at.poolCallsPerPull:.4f} pool calls)"
    )
    worst_cpu = max(r.ingressCpuMsPerPull for r in results)
    table.notes.append(
        f"target ingress CPU ≤ {TARGET_CPU_MS_PER_PULL} ms per idle pull: "
        + ("met" if worst_cpu <= TARGET_CPU_MS_PER_PULL else "MISSED")
        + " — "
        + ", ".join(f"{r.ingressCpuMsPerPull:.3f} ms at {r.workers:,}" for r in results)
    )
    table.data = {
        "fleets": [asdict(r) for r in results],
        "floors": [asdict(f) for f in floors],
        "quick": quick,
        "drivers": DRIVERS,
        "nproc": len(os.sched_getaffinity(0)),
    }
    return table
