"""`bench sql`, batch-10 table: ql.pull_offers with 10 offer ids vs a raw batch-10
SKIP LOCKED claim, same server (SPEC §18.4).

Per concurrency level (client threads, each with its own psycopg connection and
server-side prepared statements): a fresh clone of the template with two equal
queues, vacuumed and analyzed; every connection makes two unmeasured batches
first (plan caches are per connection); then both drain their queue in batches
of BATCH, alternating which goes first per level.

Ours per call: one `ql.pull_offers` of BATCH (offer id, token digest) pairs —
one authentication and session read, then per pair the single pull's scan,
placement, SKIP LOCKED claim, lease + event and offer projection. Each thread
claims for a 256-slot session of its own workers and opens the next worker's
session when fewer than BATCH slots are left (nothing is ACKed: a claimed run
leaves the candidate index as it is claimed). Raw per call: one
`qlbench.claim_batch` — select BATCH queued jobs in priority/FIFO order FOR
UPDATE SKIP LOCKED, mark them running, one event each. Claims/s = runs taken
out of the queue per second of wall time; latency is per call.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg

from qinglong.db import api
from tools.bench import raw
from tools.bench.common import (
    SESSION_EXPIRED,
    SLOTS,
    Api,
    BenchContext,
    Session,
    Table,
    Timings,
    WorkerIdent,
    fmt_ratio,
    ms,
    ratio,
    run_threads,
    sha256,
    token,
    vacuum,
)

BATCH = 10
WARMUP = 2  # batches per connection before the clock starts (not counted)
TARGET = 0.5  # at 8 and 32 connections (SPEC §18.4)
MAX_CONTENTION_RETRIES = 50

CLAIM_BATCH_SQL = """
CREATE OR REPLACE FUNCTION qlbench.claim_batch(p_worker text, p_n integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_ids bigint[];
BEGIN
    SELECT array_agg(s.id) INTO v_ids
      FROM (SELECT j.id FROM qlbench.jobs j
             WHERE j.state = 'queued'
             ORDER BY j.priority DESC, j.id
             LIMIT p_n
               FOR UPDATE SKIP LOCKED) s;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE qlbench.jobs SET state = 'running', worker = p_worker, claimed_at = clock_timestamp()
     WHERE id = ANY (v_ids);
    INSERT INTO qlbench.events (job_id, type, payload)
    SELECT i, 'job.claimed', jsonb_build_object('worker', p_worker) FROM unnest(v_ids) i;
    RETURN cardinality(v_ids);
END
$$;
"""


@dataclass
class BatchClaimer:
    """One client thread: batches of BATCH for a session of its workers."""

    api: Api
    workers: list[WorkerIdent]
    current: int = -1
    used: int = 0
    active: Session | None = None
    times: list[float] = field(default_factory=list)
    claimed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def _session(self) -> Session | None:
        if self.active is None or self.used > SLOTS - BATCH:
            self.current += 1
            if self.current >= len(self.workers):
                return None
            self.active = self.api.session(self.workers[self.current])
            self.used = 0
        return self.active

    def step(self) -> str:
        session = self._session()
        if session is None:
            return "idle:out_of_sessions"
        w = session.worker
        ids = [str(uuid.uuid4()) for _ in range(BATCH)]
        started = time.perf_counter()
        try:
            result = self.api.one(api.pull_offers(
                credential_id=w.credential_id, secret_digest=w.secret_digest,
                worker_id=w.worker_id, session_id=session.session_id,
                generation=session.generation, offer_ids=ids,
                token_digests=[sha256(token()) for _ in ids]))
        except psycopg.errors.DatabaseError as exc:
            if exc.sqlstate != SESSION_EXPIRED:
                raise
            self.active = None
            return "error:session_expired"
        elapsed = time.perf_counter() - started
        got = len(result["offers"])
        self.used += got
        if got:
            self.times.append(elapsed)
            self.claimed += got
            status = "offered"
        else:
            status = f"idle:{(result.get('idle') or {}).get('reason')}"
        self.outcomes[status] = self.outcomes.get(status, 0) + 1
        return status


def _ours(ctx: BenchContext, dsn: str, threads: int) -> Timings:
    pools = [ctx.workers[i::threads] for i in range(threads)]
    claimers: list[BatchClaimer] = []
    lock = threading.Lock()

    def work(index: int, barrier: threading.Barrier) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            claimer = BatchClaimer(Api(conn), pools[index])
            for _ in range(WARMUP):
                claimer.step()
            claimer.times.clear()
            claimer.claimed = 0
            with lock:
                claimers.append(claimer)
            barrier.wait()
            retries = 0
            while True:
                status = claimer.step()
                if status in ("offered", "idle:capacity_full", "error:session_expired"):
                    retries = 0
                    continue
                if status == "idle:contention" and retries < MAX_CONTENTION_RETRIES:
                    retries += 1
                    continue
                break

    timings = Timings(wall_s=run_threads(threads, work))
    for claimer in claimers:
        timings.count += claimer.claimed
        timings.latencies += claimer.times
    return timings


def _raw(dsn: str, threads: int) -> Timings:
    results: list[tuple[int, list[float]]] = []
    lock = threading.Lock()

    def work(index: int, barrier: threading.Barrier) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            name = f"raw-{index}"
            statement = "SELECT qlbench.claim_batch(%s, %s)"
            for _ in range(WARMUP):
                conn.execute(statement, (name, BATCH), prepare=True).fetchone()
            times: list[float] = []
            claimed = 0
            barrier.wait()
            while True:
                started = time.perf_counter()
                row = conn.execute(statement, (name, BATCH), prepare=True).fetchone()
                elapsed = time.perf_counter() - started
                if row is None or not row[0]:
                    break
                times.append(elapsed)
                claimed += int(row[0])
            with lock:
                results.append((claimed, times))

    timings = Timings(wall_s=run_threads(threads, work))
    for claimed, times in results:
        timings.count += claimed
        timings.latencies += times
    return timings


def _level(ctx: BenchContext, threads: int, runs: int, ours_first: bool) -> dict[str, Any]:
    extra = WARMUP * BATCH * threads
    with ctx.fresh_db() as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(CLAIM_BATCH_SQL)
            Api(conn).enqueue(ctx.tasks["plain"], runs + extra)
            raw.enqueue(conn, runs + extra)
        vacuum(dsn)
        if ours_first:
            ours, base = _ours(ctx, dsn, threads), _raw(dsn, threads)
        else:
            base = _raw(dsn, threads)
            ours = _ours(ctx, dsn, threads)
    return {"threads": threads, "runs": runs, "batch": BATCH, "oursFirst": ours_first,
            "ours": ours.summary(), "raw": base.summary(),
            "ratio": ratio(ours.rate, base.rate), "_ours": ours, "_raw": base}


def table(ctx: BenchContext, levels: list[int], runs: int) -> Table:
    results = [_level(ctx, threads, runs, ours_first=index % 2 == 0)
               for index, threads in enumerate(levels)]
    out = Table(f"sql, batch-{BATCH}: ql.pull_offers vs raw batch-{BATCH} SKIP LOCKED claim, "
                f"{runs:,} runs per system per level",
                ["threads", "ours claims/s", "p50 ms/call", "p95 ms/call", "raw claims/s",
                 "raw p50", "raw p95", "ratio"])
    for level in results:
        ours, base = level.pop("_ours"), level.pop("_raw")
        out.rows.append([str(level["threads"]), f"{ours.rate:,.0f}", ms(ours.pct(50)),
                         ms(ours.pct(95)), f"{base.rate:,.0f}", ms(base.pct(50)),
                         ms(base.pct(95)), fmt_ratio(level["ratio"])])
    checked = [lv for lv in results if lv["threads"] in (8, 32)]
    missed = [lv for lv in checked if math.isnan(lv["ratio"]) or lv["ratio"] < TARGET]
    out.notes.append(
        f"ratio = ours claims/s ÷ raw claims/s, both {BATCH} runs per call; target ≥ {TARGET} "
        "at 8 and 32 connections (SPEC 18.4): "
        + ("met" if not missed else
           "MISSED at " + ", ".join(str(lv["threads"]) for lv in missed)))
    out.data = {"levels": results, "target": TARGET, "batch": BATCH}
    return out
