"""`bench logs`: what live logs cost the claim path (SPEC §15.4).

Target: with 32 executing workers each streaming one log chunk every 2 s,
claims/s ≥ 0.9 x the same run without logs, measured side by side in one run.

Path: bench soak's real one (`SoakLevel`: a throwaway cluster, a fresh
migrated database, a dev CA, two `qinglong ingress serve` processes — HTTPS,
TLS 1.3, mTLS — and `qinglong worker run --execute` processes alternating
between them; no sweeper). Two groups of workers, 1 slot each:

* **streamers** (32; --quick 4) each hold one run of the `stream` task for the
  whole benchmark: ``sh -c 'while :; do [ -e FLAG ] && echo LINE; sleep 0.5;
  done'`` — a 250-byte line every 0.5 s while the flag file exists, nothing
  otherwise. Their workers ship it as the live log: while it prints, one chunk
  (~1 KiB) every 2 s each; while it is silent, no log request at all. Their
  leases are heartbeated throughout either way.
* **claimers** (8; --quick 2) execute the `claim` task's `["true"]` runs from a
  deep queue (enqueued once the streamers hold their runs, so only claimers
  take them) as fast as the box lets them: the claim throughput measured.

Phases alternate silent / streaming in the order ABBA ABBA (--quick: ABBA)
with the same processes, so drift (caches, autovacuum, the neighbours' load on
a shared box) falls on both sides alike; the first phase is preceded by a
warm-up. Per phase: claims = leases whose `claimed_at` falls inside it (from
the database), log requests answered 200 (the ingresses' /metrics,
`qinglong_ingress_requests_total{route="/v1/leases/log"}`). The verdict:
mean claims/s of the streaming phases ÷ mean of the silent ones.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from qinglong.demo import pki_ca_cert, spawn
from tools.bench.common import Api, Table, fmt_ratio, ratio
from tools.bench.e2e import INGRESSES, READY_TIMEOUT_S, _wait
from tools.bench.soak import Sizes as SoakSizes
from tools.bench.soak import SoakLevel

TARGET_RATIO = 0.9
LOG_ROUTE = "/v1/leases/log"
LINE = "x" * 240  # + the counter and newline: ~250 bytes every 0.5 s, ~1 KiB a chunk


@dataclass(frozen=True)
class Sizes:
    streamers: int
    claimers: int
    order: str  # "S" silent, "L" streaming logs
    phase_s: float
    warmup_s: float
    queued: int  # `true` runs enqueued for the claimers


FULL = Sizes(streamers=32, claimers=8, order="SLLSSLLS", phase_s=20.0, warmup_s=15.0,
             queued=40_000)  # fmt: skip
QUICK = Sizes(streamers=4, claimers=2, order="SLLS", phase_s=4.0, warmup_s=3.0, queued=4_000)


@dataclass
class Phase:
    kind: str
    seconds: float = 0.0
    claims: int = 0
    log_requests: float = 0.0
    log_refused: float = 0.0
    streaming: int = 0  # stream runs still running at the phase's end

    @property
    def per_s(self) -> float:
        return self.claims / self.seconds if self.seconds else 0.0


class LogsLevel(SoakLevel):
    """SoakLevel with two groups of workers (streamers first, then claimers)."""

    def __init__(self, cluster: Any, root: Path, sizes: Sizes, runs_root: Path) -> None:
        total = sizes.streamers + sizes.claimers
        soak = SoakSizes(workers=total, depth=0, intervals=1, interval_s=1.0, warmup_s=0.0,
                         sample_s=1.0)  # fmt: skip
        super().__init__(cluster, root, soak, runs_root)
        self.started: list[int] = []

    def start_group(self, first: int, count: int) -> None:
        from qinglong.worker.run_as import local_run_as

        for index in range(first, first + count):
            ident = self.idents[index]
            journal = self.run_dir / f"journal-{index}"
            self.journals.append(journal)
            config = {
                "ingressUrl": self.ingresses[index % INGRESSES]["ingressUrl"],
                "workerId": ident.worker_id, "certFile": str(ident.cert_file),
                "keyFile": str(ident.key_file), "caFile": str(pki_ca_cert(self.root / "ca")),
                "credentialFile": str(ident.credential_file), "journal": str(journal),
                "capabilities": {"schema": "qinglong/worker-capabilities@v1",
                                 "executors": ["remote-worker"], "labels": {}, "runtimes": {},
                                 "slots": 1},
                "execute": True, "executor": {"shutdownGraceS": 5, "killGraceS": 2,
                                              "runsDir": str(self.runs_root / journal.name)},
            }  # fmt: skip
            path = journal.with_suffix(".json")
            path.write_text(json.dumps(config), encoding="utf-8")
            argv = [sys.executable, "-m", "qinglong", "worker", "run", "--config", str(path),
                    "--run-as", local_run_as()]  # fmt: skip
            self.children.append(spawn(f"worker-{index}", argv,
                                       self.root / f"worker-{index}.log"))  # fmt: skip
            self.started.append(index)

    def log_counts(self) -> tuple[float, float]:
        """(log requests answered 200, answered otherwise), both ingresses summed."""
        ok = other = 0.0
        prefix = f'qinglong_ingress_requests_total{{route="{LOG_ROUTE}",status="'
        for ingress in self.ingresses:
            with urllib.request.urlopen(f"{ingress['adminUrl']}/metrics", timeout=5) as resp:
                for line in resp.read().decode().splitlines():
                    name, _, value = line.rpartition(" ")
                    if name.startswith(prefix):
                        if name[len(prefix) :].startswith("200"):
                            ok += float(value)
                        else:
                            other += float(value)
        return ok, other


def _task(conn: psycopg.Connection, name: str, argv: list[str]) -> str:
    from qinglong.db import api
    from qinglong.service.compiler import compile_command

    doc = {"schema": "qinglong/command@v1", "argv": argv, "env": {}, "timeoutS": 3600}
    compiled = compile_command(doc)
    return (
        api.publish_revision(project="bench", task=name, canonical=compiled.canonical)
        .run(conn, prepare=True)
        .task_id
    )


def _one(conn: psycopg.Connection, sql: str, params: Any = None) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def _running(conn: psycopg.Connection, task_id: str | None = None) -> int:
    return int(_one(conn, "SELECT count(*) FROM ql_private.run_leases l "
                          "JOIN ql_private.runs r ON r.id = l.run_id "
                          "WHERE l.started_at IS NOT NULL AND l.released_at IS NULL "
                          "AND (%s::uuid IS NULL OR r.task_id = %s::uuid)",
                    (task_id, task_id)))  # fmt: skip


def _measure(level: LogsLevel, sizes: Sizes, flag: Path) -> dict[str, Any]:
    level.setup()
    script = (f"i=0; while :; do i=$((i+1)); if [ -e {shlex.quote(str(flag))} ]; then "
              f"echo \"$i {LINE}\"; fi; sleep 0.5; done")  # fmt: skip
    with psycopg.connect(level.dsn, autocommit=True) as conn:
        stream_task = _task(conn, "stream", ["sh", "-c", script])
        claim_task = Api(conn).task("claim")
        level.start_ingresses()
        level.start_group(0, sizes.streamers)
        Api(conn).enqueue(stream_task, sizes.streamers)
        _await(level, lambda: _running(conn) >= sizes.streamers, "streamers running")
        Api(conn).enqueue(claim_task, sizes.queued)
        level.start_group(sizes.streamers, sizes.claimers)
        _await(level, level.sessions_open, "worker sessions")
        time.sleep(sizes.warmup_s)
        phases = [_phase(conn, level, kind, sizes.phase_s, flag, stream_task)
                  for kind in sizes.order]  # fmt: skip
        flag.unlink(missing_ok=True)
        level.check_alive()
        left = int(_one(conn, "SELECT count(*) FROM ql_private.runs WHERE state = 'queued'"))
    return {"phases": phases, "queuedLeft": left, "streamTask": stream_task}


def _await(level: LogsLevel, predicate: Any, what: str) -> None:
    try:
        _wait(predicate, READY_TIMEOUT_S * 2, what, level.children)
    except RuntimeError:
        level.check_alive()  # says why, with the dead one's log
        raise


def _phase(conn: psycopg.Connection, level: LogsLevel, kind: str, seconds: float,
           flag: Path, stream_task: str) -> Phase:  # fmt: skip
    if kind == "L":
        flag.touch()
        flag.chmod(0o644)
    else:
        flag.unlink(missing_ok=True)
    time.sleep(2.5)  # the streamers' output (and its shipping) settles into the phase
    level.check_alive()
    ok0, other0 = level.log_counts()
    t0 = _one(conn, "SELECT clock_timestamp()")
    started = time.monotonic()
    time.sleep(seconds)
    t1 = _one(conn, "SELECT clock_timestamp()")
    elapsed = time.monotonic() - started
    ok1, other1 = level.log_counts()
    claims = int(_one(conn, "SELECT count(*) FROM ql_private.run_leases "
                            "WHERE claimed_at >= %s AND claimed_at < %s", (t0, t1)))  # fmt: skip
    streaming = _running(conn, stream_task)
    return Phase(kind, elapsed, claims, ok1 - ok0, other1 - other0, streaming)


def run_standalone(quick: bool) -> list[Table]:
    from qinglong.throwaway_postgres import ThrowawayPostgres

    sizes = QUICK if quick else FULL
    cluster = ThrowawayPostgres()
    cluster.start()
    try:
        with (
            tempfile.TemporaryDirectory(prefix="qinglong-bench-logs-") as tmp,
            tempfile.TemporaryDirectory(prefix="qinglong-bench-runs-") as runs,
            tempfile.TemporaryDirectory(prefix="qinglong-bench-flag-") as flags,
        ):
            Path(runs).chmod(0o711)
            Path(flags).chmod(0o755)  # the run-as user looks for the flag here
            level = LogsLevel(cluster, Path(tmp), sizes, Path(runs))
            try:
                result = _measure(level, sizes, Path(flags) / "on")
            finally:
                level.teardown()
    finally:
        cluster.cleanup()
    return report(sizes, result)


def report(sizes: Sizes, result: dict[str, Any]) -> list[Table]:
    phases: list[Phase] = result["phases"]
    silent = [p for p in phases if p.kind == "S"]
    logged = [p for p in phases if p.kind == "L"]
    mean_silent = sum(p.per_s for p in silent) / len(silent)
    mean_logged = sum(p.per_s for p in logged) / len(logged)
    verdict = ratio(mean_logged, mean_silent)
    table = Table(
        f"logs: {sizes.claimers} claiming + {sizes.streamers} streaming `worker run --execute` "
        f"processes, 2 ingresses (mTLS), phases {sizes.order} x {sizes.phase_s:g} s",
        ["phase", "live logs", "claims", "claims/s", "log requests/s", "log requests not 200",
         "streams running at end"],
    )  # fmt: skip
    for index, phase in enumerate(phases):
        table.rows.append([str(index + 1), "streaming" if phase.kind == "L" else "silent",
                           f"{phase.claims:,}", f"{phase.per_s:,.1f}",
                           f"{phase.log_requests / phase.seconds:,.1f}",
                           f"{phase.log_refused:g}", str(phase.streaming)])  # fmt: skip
    met = verdict >= TARGET_RATIO
    table.notes += [
        f"claims/s streaming ÷ silent = {mean_logged:,.1f} ÷ {mean_silent:,.1f} = "
        f"{fmt_ratio(verdict)} (target ≥ {TARGET_RATIO}: {'met' if met else 'MISSED'})",
        f"streaming: each of the {sizes.streamers} streamers' commands prints a ~250-byte "
        "line every 0.5 s; its worker ships one chunk every 2 s "
        f"(expected ≈ {sizes.streamers / 2:g} log requests/s); silent: the same commands "
        "print nothing (no log request), their leases heartbeated alike",
        f"claims = leases claimed inside the phase (`true` runs; {result['queuedLeft']:,} "
        "still queued at the end, so the claimers never ran dry)",
    ]
    table.data = {"streamers": sizes.streamers, "claimers": sizes.claimers,
                  "order": sizes.order, "phaseS": sizes.phase_s,
                  "phases": [{"kind": p.kind, "seconds": round(p.seconds, 2), "claims": p.claims,
                              "perS": round(p.per_s, 2), "logRequests": p.log_requests,
                              "logRefused": p.log_refused, "streaming": p.streaming}
                             for p in phases],
                  "silentPerS": round(mean_silent, 2), "streamingPerS": round(mean_logged, 2),
                  "ratio": verdict, "ratioMet": met}  # fmt: skip
    return [table]
