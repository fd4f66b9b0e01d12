"""`bench sql`: ql.pull_offer claims vs a raw SKIP LOCKED claim, same server.

Per concurrency level (client threads, each with its own psycopg connection
and server-side prepared statements): a fresh clone of the template with two
equal queues — N runs for ql.pull_offer, N jobs for qlbench.claim — vacuumed
and analyzed; every connection makes two unmeasured claims first (plpgsql
plans are cached per connection); then both drain their queue, in alternating order per level
(ours first at 1, 8, 32; raw first at 4, 16) so neither always runs on a
warmer cache.

Ours per run: one `ql.pull_offer` (authentication, session fences, slot check,
bounded keyset scan, placement, the SKIP LOCKED claim, lease + event, the offer
projection). The claim itself takes the run out of the candidate index (a
`dispatching` run is not in runs_candidate_keyset), exactly as the raw claim's
update does, so both sides are one round trip per run taken out of the queue.
Latency percentiles are of the claim call (pull_offer vs qlbench.claim). Then,
on the same database, the schema floor drains N fresh runs: qlbench.floor_claim
(tools/bench/schema_floor.py) makes only the writes a claim must make in our
schema — the SKIP LOCKED pick, the lease insert, the run update, the event — and
none of the pull's checks, so floor ÷ raw bounds what any pull can reach without
changing what is stored.

A second table runs the same levels with sessions that look like real workers:
each client thread is one worker whose session has WORKER_SLOTS slots, and
every offer it is given is ACKed `starting` and completed `succeeded` (one
`ql.ack_lease` and one `ql.complete_lease` call, each with the lease version
the previous answer carried) before the next pull, so slot accounting counts a
handful of live leases, as it does in production. In exchange the raw side
reports each job started and finished (`qlbench.start`, `qlbench.finish`: one
call each, an update + an event insert like its claim). Both sides therefore
make three round trips per job; claims/s is jobs taken out of the queue per
second of wall time, all three calls included.
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
from tools.bench import raw, schema_floor, sql_batch
from tools.bench.common import (
    SESSION_EXPIRED,
    Api,
    BenchContext,
    Claimer,
    Session,
    Table,
    Timings,
    WorkerIdent,
    capabilities,
    fmt_ratio,
    ms,
    ratio,
    run_threads,
    sha256,
    token,
    vacuum,
    warm_up,
)

FULL = {"levels": [1, 4, 8, 16, 32], "runs": 20_000}
QUICK = {"levels": [1, 8, 32], "runs": 600}
TARGET = 0.5  # at 8 and 32 connections
TARGET_ONE = 0.4  # at 1 connection
MAX_CONTENTION_RETRIES = 50
WARMUP = 2  # claims per connection before the clock starts (not counted)
WORKER_SLOTS = 4  # a real worker's session: a few slots, each offer ACKed and completed
HEARTBEAT_S = 20.0  # a real worker's session heartbeat interval (the default)


@dataclass
class LifecycleWorker:
    """One client thread as a real worker: a session of WORKER_SLOTS slots; every
    offer is ACKed `starting` and completed `succeeded` before the next pull; the
    session is heartbeaten every HEARTBEAT_S (untimed), so it outlives a level
    longer than its 60 s lease as a real worker's does."""

    api: Api
    ident: WorkerIdent
    session: Session | None = None
    beat_at: float = 0.0
    claim_times: list[float] = field(default_factory=list)
    lifecycle_times: list[float] = field(default_factory=list)  # ACK + completion
    outcomes: dict[str, int] = field(default_factory=dict)

    def _count(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def step(self) -> str:
        if self.session is None:
            self.session = self.api.session(self.ident, capabilities(slots=WORKER_SLOTS))
            self.beat_at = time.monotonic()
        elif time.monotonic() - self.beat_at >= HEARTBEAT_S:
            self._heartbeat(self.session)
        offer_id, digest = str(uuid.uuid4()), sha256(token())
        started = time.perf_counter()
        try:
            result = self.api.pull(self.session, offer_id, digest)
        except psycopg.errors.DatabaseError as exc:
            if exc.sqlstate != SESSION_EXPIRED:
                raise
            self.session = None  # no heartbeats here: the next step opens a new one
            self._count("error:session_expired")
            return "error:session_expired"
        elapsed = time.perf_counter() - started
        status = str(result.get("status"))
        if status == "idle":
            status = f"idle:{result.get('reason')}"
        self._count(status)
        if status == "offered":
            self.claim_times.append(elapsed)
            started = time.perf_counter()
            self._finish(offer_id, digest, int(result["offer"]["lease"]["leaseVersion"]))
            self.lifecycle_times.append(time.perf_counter() - started)
        return status

    def _heartbeat(self, session: Session) -> None:
        w = session.worker
        beat = self.api.one(
            api.heartbeat_session(
                credential_id=w.credential_id,
                secret_digest=w.secret_digest,
                worker_id=w.worker_id,
                session_id=session.session_id,
                generation=session.generation,
            )
        ).doc
        if beat.get("status") != "ok":
            raise RuntimeError(f"heartbeat_session: {beat}")
        self.beat_at = time.monotonic()

    def _finish(self, offer_id: str, digest: bytes, version: int) -> None:
        s, w = self.session, self.ident
        assert s is not None
        common = {
            "credential_id": w.credential_id,
            "secret_digest": w.secret_digest,
            "worker_id": w.worker_id,
            "session_id": s.session_id,
            "generation": s.generation,
            "offer_id": offer_id,
            "token_digest": digest,
        }
        acked = self.api.one(api.ack_lease(**common, lease_version=version, phase="starting")).doc
        if acked.get("status") != "ok":
            raise RuntimeError(f"ack_lease: {acked}")
        version = int(acked["lease"]["leaseVersion"])
        done = self.api.one(
            api.complete_lease(**common, lease_version=version, outcome="succeeded", exit_code=0)
        ).doc
        if done.get("status") != "ok":
            raise RuntimeError(f"complete_lease: {done}")


def _ours(ctx: BenchContext, dsn: str, threads: int) -> tuple[Timings, Timings, dict[str, int]]:
    pools = [ctx.workers[i::threads] for i in range(threads)]
    claimers: list[Claimer] = []
    lock = threading.Lock()

    def work(index: int, barrier: threading.Barrier) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            claimer = Claimer(Api(conn), pools[index])
            warm_up(claimer, WARMUP)  # plan caches are per connection: fill them first
            with lock:
                claimers.append(claimer)
            barrier.wait()
            retries = 0
            while True:
                status = claimer.step(ack=False)
                if status == "offered" or status == "idle:capacity_full":
                    retries = 0
                    continue
                if status == "idle:contention" and retries < MAX_CONTENTION_RETRIES:
                    retries += 1
                    continue
                break

    wall = run_threads(threads, work)
    pulls = Timings(wall_s=wall)
    acks = Timings(wall_s=wall)
    outcomes: dict[str, int] = {}
    for claimer in claimers:
        offered = claimer.outcomes.get("offered", 0)
        pulls.count += offered
        # Only the claims' latencies: the closing idle pulls are not claims.
        pulls.latencies += claimer.claim_times
        acks.latencies += claimer.ack_times
        for key, value in claimer.outcomes.items():
            outcomes[key] = outcomes.get(key, 0) + value
    acks.count = len(acks.latencies)
    return pulls, acks, outcomes


def _prepare(ctx: BenchContext, dsn: str, runs: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        Api(conn).enqueue(ctx.tasks["plain"], runs)
        raw.enqueue(conn, runs)
    vacuum(dsn)


def _floor(ctx: BenchContext, dsn: str, threads: int, runs: int) -> Timings:
    """The schema floor (tools/bench/schema_floor.py) over `runs` fresh ready runs
    of the same database, after ours and raw drained theirs."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        Api(conn).enqueue(ctx.tasks["plain"], runs + WARMUP * threads)
    vacuum(dsn)
    return schema_floor.floor_drain(dsn, threads, WARMUP)


def _level(ctx: BenchContext, threads: int, runs: int, ours_first: bool) -> dict[str, Any]:
    with ctx.fresh_db() as dsn:
        _prepare(ctx, dsn, runs + WARMUP * threads)
        if ours_first:
            ours, acks, outcomes = _ours(ctx, dsn, threads)
            base = raw.drain(dsn, threads, WARMUP)
        else:
            base = raw.drain(dsn, threads, WARMUP)
            ours, acks, outcomes = _ours(ctx, dsn, threads)
        floor = _floor(ctx, dsn, threads, runs)
    return {"threads": threads, "runs": runs, "oursFirst": ours_first,
            "ours": ours.summary(), "ack": acks.summary(), "raw": base.summary(),
            "floor": floor.summary(), "ratio": ratio(ours.rate, base.rate),
            "floorRatio": ratio(floor.rate, base.rate), "outcomes": outcomes,
            "_ours": ours, "_raw": base, "_ack": acks, "_floor": floor}  # fmt: skip


def _lifecycle_ours(
    ctx: BenchContext, dsn: str, threads: int
) -> tuple[Timings, Timings, dict[str, int]]:
    workers: list[LifecycleWorker] = []
    lock = threading.Lock()

    def work(index: int, barrier: threading.Barrier) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            worker = LifecycleWorker(Api(conn), ctx.workers[index])
            for _ in range(WARMUP * 10):  # plan caches are per connection: fill them first
                if worker.outcomes.get("offered", 0) >= WARMUP:
                    break
                worker.step()
            worker.claim_times.clear()
            worker.lifecycle_times.clear()
            worker.outcomes.clear()
            with lock:
                workers.append(worker)
            barrier.wait()
            retries = 0
            while True:
                status = worker.step()
                if status in ("offered", "error:session_expired"):
                    retries = 0
                    continue
                if status == "idle:contention" and retries < MAX_CONTENTION_RETRIES:
                    retries += 1
                    continue
                break

    wall = run_threads(threads, work)
    claims, lifecycle = Timings(wall_s=wall), Timings(wall_s=wall)
    outcomes: dict[str, int] = {}
    for worker in workers:
        claims.latencies += worker.claim_times
        lifecycle.latencies += worker.lifecycle_times
        for key, value in worker.outcomes.items():
            outcomes[key] = outcomes.get(key, 0) + value
    claims.count = outcomes.get("offered", 0)
    lifecycle.count = len(lifecycle.latencies)
    return claims, lifecycle, outcomes


def _lifecycle_level(
    ctx: BenchContext, threads: int, runs: int, ours_first: bool
) -> dict[str, Any]:
    with ctx.fresh_db() as dsn:
        _prepare(ctx, dsn, runs + WARMUP * threads)
        if ours_first:
            ours, rest, outcomes = _lifecycle_ours(ctx, dsn, threads)
            base = raw.drain(dsn, threads, WARMUP, lifecycle=True)
        else:
            base = raw.drain(dsn, threads, WARMUP, lifecycle=True)
            ours, rest, outcomes = _lifecycle_ours(ctx, dsn, threads)
    return {"threads": threads, "runs": runs, "oursFirst": ours_first, "ours": ours.summary(),
            "ackComplete": rest.summary(), "raw": base.summary(),
            "ratio": ratio(ours.rate, base.rate), "outcomes": outcomes,
            "_ours": ours, "_raw": base}  # fmt: skip


def _table(title: str, levels: list[dict[str, Any]]) -> Table:
    floors = all("_floor" in level for level in levels)
    table = Table(
        title,
        [
            "threads",
            "ours claims/s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "raw claims/s",
            "raw p50",
            "raw p95",
            "raw p99",
            "ratio",
        ]
        + (["schema floor claims/s", "floor ÷ raw"] if floors else []),
    )
    for level in levels:
        ours, base = level.pop("_ours"), level.pop("_raw")
        level.pop("_ack", None)
        floor = level.pop("_floor", None)
        table.rows.append([
            str(level["threads"]), f"{ours.rate:,.0f}", ms(ours.pct(50)), ms(ours.pct(95)),
            ms(ours.pct(99)), f"{base.rate:,.0f}", ms(base.pct(50)),
            ms(base.pct(95)), ms(base.pct(99)), fmt_ratio(level["ratio"]),
        ] + ([f"{floor.rate:,.0f}", fmt_ratio(level["floorRatio"])] if floor else []))  # fmt: skip
    return table


def _target_note(levels: list[dict[str, Any]]) -> str:
    goals = {1: TARGET_ONE, 8: TARGET, 32: TARGET}
    checked = [lv for lv in levels if lv["threads"] in goals]
    missed = [lv for lv in checked if math.isnan(lv["ratio"]) or lv["ratio"] < goals[lv["threads"]]]
    return (
        f"ratio = ours claims/s ÷ raw claims/s; target ≥ {TARGET} at 8 and 32 threads, "
        f"≥ {TARGET_ONE} at 1: "
        + ("met" if not missed else "MISSED at " + ", ".join(str(lv["threads"]) for lv in missed))
    )


def run(ctx: BenchContext) -> list[Table]:
    sizes = QUICK if ctx.quick else FULL
    levels = [
        _level(ctx, threads, sizes["runs"], ours_first=index % 2 == 0)
        for index, threads in enumerate(sizes["levels"])
    ]
    table = _table(
        f"sql: ql.pull_offer vs raw SKIP LOCKED claim, {sizes['runs']:,} runs per system per level",
        levels,
    )
    table.notes.append(_target_note(levels))
    table.notes.append(
        "both = 1 round trip per run taken out of the queue (ours: pull_offer incl. auth, "
        "fences, placement, lease + event + offer projection; raw: select + update + event)"
    )
    table.notes.append(
        "schema floor = qlbench.floor_claim on the same database after both, over fresh "
        "runs: only the writes a claim must make in our schema (SKIP LOCKED pick, lease "
        "insert, run -> dispatching, run.dispatched event) and none of the pull's checks "
        "(tools/bench/schema_floor.py); floor ÷ raw is the best ratio any pull could "
        "reach without changing what is stored"
    )
    table.data = {"levels": levels, "target": TARGET, "targetOne": TARGET_ONE}
    cycles = [
        _lifecycle_level(ctx, threads, sizes["runs"], ours_first=index % 2 == 1)
        for index, threads in enumerate(sizes["levels"])
    ]
    workers = _table(
        f"sql, real workers: {WORKER_SLOTS}-slot sessions, every offer ACKed and "
        f"completed vs raw claim + start + finish, {sizes['runs']:,} runs per "
        "system per level",
        cycles,
    )
    workers.notes.append(_target_note(cycles))
    workers.notes.append(
        "both = 3 round trips per job (ours: pull_offer, ack_lease starting, complete_lease "
        "succeeded; raw: qlbench.claim, qlbench.start, qlbench.finish); claims/s counts jobs "
        "per second of wall time, all three calls included; latency columns are the claim "
        "call's"
    )
    workers.data = {
        "levels": cycles,
        "target": TARGET,
        "targetOne": TARGET_ONE,
        "workerSlots": WORKER_SLOTS,
    }
    batches = sql_batch.table(ctx, sizes["levels"], sizes["runs"])
    return [table, workers, *batches]
