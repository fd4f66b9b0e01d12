"""`bench e2e`: offers through the real path vs PgQueuer's own consumer.

Ours, per level (8 and 32 workers; --quick: 8): a fresh migrated database in a
throwaway cluster, a dev CA, N worker identities, **two** `qinglong ingress
serve` processes (HTTPS, TLS 1.3, mTLS; workers alternate between them) and N
`qinglong worker run` processes polling an empty queue. Once every session is
open, `offers` runs are enqueued in one call; the level ends when every offer
sits validated and fsynced in a worker's inbox. offers/s = offers ÷ (last
inbox write - enqueue); latency per offer = inbox write (`acceptedAtMs`) -
`queuedAtMs` (enqueue → durable on the worker), p50/p99. The ingresses'
/metrics give database calls per request.

PgQueuer, same level: a fresh database in the same cluster with PgQueuer's
schema, N consumer processes (`qinglong.bench.pgq_consumer`: PgQueuer's
QueueManager with its defaults) waiting on LISTEN/NOTIFY; the same number of
jobs enqueued in one call; latency = handler start - job `created`.

PgQueuer is not a dependency: the full run installs `pgqueuer[psycopg]` with
pip into the current environment when it is missing (and says so); --quick
never installs, and reports "not measured" for it unless it is importable.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from qinglong.bench.common import Table, fmt_ratio, percentile, ratio
from qinglong.demo import Child, pki_ca_cert, spawn, stop_children

FULL = {"levels": [8, 32], "offers": 2000}
QUICK = {"levels": [8], "offers": 160}
INGRESSES = 2
READY_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 300.0
INGRESS_ROLE = "qinglong_bench_ingress"


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


# ----------------------------------------------------------------------- ours


class OursLevel:
    """One level of the real path: database, identities, 2 ingresses, N workers."""

    def __init__(self, cluster: Any, root: Path, workers: int, offers: int) -> None:
        self.cluster, self.root, self.workers, self.offers = cluster, root, workers, offers
        self.db = f"ql_e2e_{os.getpid()}_{workers}"
        self.children: list[Child] = []
        self.ingresses: list[dict[str, Any]] = []
        self.journals: list[Path] = []

    def setup(self) -> None:
        from db.migrator import migrate
        from service import control_plane, pki

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
                                               self.root / f"l{self.workers}" / f"w{i}")
                for i in range(self.workers)
            ]  # fmt: skip

    def start_ingresses(self) -> None:
        for index in range(INGRESSES):
            ready = self.root / f"l{self.workers}" / f"ingress-{index}.ready"
            config = {
                "dsn": self.cluster.dsn(self.db, user=INGRESS_ROLE),
                "certFile": str(self.root / "server" / "server.pem"),
                "keyFile": str(self.root / "server" / "server-key.pem"),
                "clientCaFile": str(pki_ca_cert(self.root / "ca")),
                "port": 0, "adminPort": 0, "poolMaxSize": 4,
                # Workers pull again right after each offer: no per-worker limiter here.
                "ratePerS": 10000, "rateBurst": 10000,
                "idleRetryAfterMs": 100, "idleJitterMs": 50,
                "auditLog": str(self.root / f"audit-{self.workers}-{index}.log"),
                "readyFile": str(ready), "logLevel": "WARNING",
            }  # fmt: skip
            path = self.root / f"l{self.workers}" / f"ingress-{index}.json"
            path.write_text(json.dumps(config), encoding="utf-8")
            argv = [sys.executable, "-m", "qinglong", "ingress", "serve", "--config", str(path)]
            child = spawn(f"ingress-{index}", argv, self.root / f"ingress-{index}.log")
            self.children.append(child)
            self.ingresses.append(_wait(lambda r=ready: _read_json(r), READY_TIMEOUT_S,
                                        "ingress ready", self.children))  # fmt: skip

    def start_workers(self) -> None:
        for index, ident in enumerate(self.idents):
            journal = self.root / f"l{self.workers}" / f"journal-{index}"
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
            self.children.append(spawn(f"worker-{index}", argv,
                                       self.root / f"worker-{self.workers}-{index}.log"))

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

    def metrics(self) -> dict[str, float]:
        totals = {"requests": 0.0, "dbCalls": 0.0}
        for ingress in self.ingresses:
            with urllib.request.urlopen(f"{ingress['adminUrl']}/metrics", timeout=5) as resp:
                text = resp.read().decode()
            for line in text.splitlines():
                if line.startswith("qinglong_ingress_requests_total{"):
                    totals["requests"] += float(line.rsplit(" ", 1)[1])
                elif line.startswith("qinglong_ingress_db_call_duration_seconds_count{"):
                    totals["dbCalls"] += float(line.rsplit(" ", 1)[1])
        return totals

    def measure(self) -> dict[str, Any]:
        from service import control_plane
        from service.compiler import compile_command

        _wait(self.sessions_open, READY_TIMEOUT_S, "worker sessions", self.children)
        doc = {"schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 60}
        with control_plane.connect(self.dsn) as conn:
            task = control_plane.publish_revision(conn, "e2e", "t",
                                                  compile_command(doc).canonical)["taskId"]
            started_ms = time.time() * 1000
            control_plane.enqueue_runs(conn, str(task), 0, self.offers)
        _wait(lambda: len(self.inbox()) >= self.offers, DRAIN_TIMEOUT_S, "offers delivered",
              self.children)  # fmt: skip
        entries = self.inbox()
        accepted = [float(e["acceptedAtMs"]) for e in entries]
        latencies = [(float(e["acceptedAtMs"]) - float(e["offer"]["candidate"]["queuedAtMs"]))
                     / 1000 for e in entries]  # fmt: skip
        wall = (max(accepted) - started_ms) / 1000
        counts = self.metrics()
        return {"workers": self.workers, "offers": len(entries), "wallS": wall,
                "firstMs": min(accepted) - started_ms,
                "perS": len(entries) / wall, "p50Ms": percentile(latencies, 50) * 1000,
                "p99Ms": percentile(latencies, 99) * 1000,
                "dbCallsPerRequest": ratio(counts["dbCalls"], counts["requests"])}  # fmt: skip

    def teardown(self) -> None:
        workers = [c for c in self.children if c.name.startswith("worker-")]
        stop_children(workers)
        stop_children([c for c in self.children if c not in workers])
        with contextlib.suppress(Exception):
            self.cluster.drop_database(self.db)


def _ours(cluster: Any, root: Path, workers: int, offers: int) -> dict[str, Any]:
    level = OursLevel(cluster, root, workers, offers)
    try:
        level.setup()
        level.start_ingresses()
        level.start_workers()
        return level.measure()
    finally:
        level.teardown()


# ------------------------------------------------------------------- PgQueuer


def ensure_pgqueuer(quick: bool) -> str | None:
    """None when importable; otherwise why PgQueuer is not measured."""
    if importlib.util.find_spec("pgqueuer") is not None:
        return None
    if quick:
        return "PgQueuer is not installed (--quick never installs it)"
    print("bench e2e: installing pgqueuer[psycopg] with pip into this environment "
          "(bench only, not a dependency)", flush=True)  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                           "pgqueuer[psycopg]"], capture_output=True, text=True,
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


def _pgq(cluster: Any, root: Path, workers: int, jobs: int) -> dict[str, Any]:
    db = f"ql_pgq_{os.getpid()}_{workers}"
    dsn = cluster.create_database(db)
    children: list[Child] = []
    outs = [root / f"pgq-{workers}-{i}.txt" for i in range(workers)]
    try:
        asyncio.run(_pgq_setup(dsn, None))
        for i, out in enumerate(outs):
            argv = [sys.executable, "-m", "qinglong.bench.pgq_consumer", dsn, str(out)]
            children.append(spawn(f"pgq-{i}", argv, root / f"pgq-{workers}-{i}.log"))
        _wait(lambda: all(Path(f"{out}.ready").exists() for out in outs), READY_TIMEOUT_S,
              "PgQueuer consumers ready", children)
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
        rows = handled()
    finally:
        stop_children(children)
        with contextlib.suppress(Exception):
            cluster.drop_database(db)
    latencies = [done - created for done, created in rows]
    wall = max(done for done, _ in rows) - started
    return {"workers": workers, "jobs": len(rows), "wallS": wall, "perS": len(rows) / wall,
            "firstMs": (min(done for done, _ in rows) - started) * 1000,
            "p50Ms": percentile(latencies, 50) * 1000,
            "p99Ms": percentile(latencies, 99) * 1000}  # fmt: skip


# ---------------------------------------------------------------------- report


def run_standalone(quick: bool) -> list[Table]:
    from qinglong.throwaway_postgres import ThrowawayPostgres

    sizes = QUICK if quick else FULL
    missing = ensure_pgqueuer(quick)
    levels = []
    cluster = ThrowawayPostgres()
    cluster.start()
    try:
        with tempfile.TemporaryDirectory(prefix="qinglong-bench-e2e-") as tmp:
            root = Path(tmp)
            for workers in sizes["levels"]:
                ours = _ours(cluster, root, workers, sizes["offers"])
                other = None if missing else _pgq(cluster, root, workers, sizes["offers"])
                levels.append({"workers": workers, "ours": ours, "pgqueuer": other,
                               "ratio": ratio(ours["perS"], other["perS"]) if other
                               else float("nan")})  # fmt: skip
    finally:
        cluster.cleanup()
    table = Table(
        f"e2e: {sizes['offers']:,} offers through 2 ingress processes (mTLS) into worker "
        "inboxes vs PgQueuer's consumer",
        ["workers", "ours offers/s", "first ms", "p50 ms", "p99 ms", "db calls/request",
         "PgQueuer jobs/s", "first ms", "p50 ms", "p99 ms", "ratio"],
    )  # fmt: skip
    for level in levels:
        ours, other = level["ours"], level["pgqueuer"]
        table.rows.append([
            str(level["workers"]), f"{ours['perS']:,.0f}", f"{ours['firstMs']:.0f}",
            f"{ours['p50Ms']:.0f}",
            f"{ours['p99Ms']:.0f}", f"{ours['dbCallsPerRequest']:.2f}",
            f"{other['perS']:,.0f}" if other else "not measured",
            f"{other['firstMs']:.0f}" if other else "-",
            f"{other['p50Ms']:.0f}" if other else "-", f"{other['p99Ms']:.0f}" if other else "-",
            fmt_ratio(level["ratio"]),
        ])  # fmt: skip
    table.notes.append("latency = enqueue → offer validated and fsynced in a worker inbox "
                       "(ours) / enqueue → handler start (PgQueuer), under a burst of the "
                       "whole batch, so it is mostly queueing time; 'first' = enqueue → first "
                       "delivery; ratio = ours offers/s ÷ PgQueuer jobs/s")
    if missing:
        table.notes.append(f"PgQueuer not measured: {missing}")
    table.data = {"levels": levels, "measured": True, "pgqueuer": missing is None}
    return [table]
