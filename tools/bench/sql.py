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
Latency percentiles are of the claim call (pull_offer vs qlbench.claim).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import psycopg

from tools.bench import raw
from tools.bench.common import (
    Api,
    BenchContext,
    Claimer,
    Table,
    Timings,
    fmt_ratio,
    ms,
    ratio,
    run_threads,
    vacuum,
    warm_up,
)

FULL = {"levels": [1, 4, 8, 16, 32], "runs": 20_000}
QUICK = {"levels": [1, 8, 32], "runs": 600}
TARGET = 0.7
MAX_CONTENTION_RETRIES = 50
WARMUP = 2  # claims per connection before the clock starts (not counted)


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


def _level(ctx: BenchContext, threads: int, runs: int, ours_first: bool) -> dict[str, Any]:
    with ctx.fresh_db() as dsn:
        _prepare(ctx, dsn, runs + WARMUP * threads)
        if ours_first:
            ours, acks, outcomes = _ours(ctx, dsn, threads)
            base = raw.drain(dsn, threads, WARMUP)
        else:
            base = raw.drain(dsn, threads, WARMUP)
            ours, acks, outcomes = _ours(ctx, dsn, threads)
    return {"threads": threads, "runs": runs, "oursFirst": ours_first,
            "ours": ours.summary(), "ack": acks.summary(), "raw": base.summary(),
            "ratio": ratio(ours.rate, base.rate), "outcomes": outcomes,
            "_ours": ours, "_raw": base, "_ack": acks}  # fmt: skip


def run(ctx: BenchContext) -> list[Table]:
    sizes = QUICK if ctx.quick else FULL
    levels = []
    for index, threads in enumerate(sizes["levels"]):
        levels.append(_level(ctx, threads, sizes["runs"], ours_first=index % 2 == 0))
    table = Table(
        f"sql: ql.pull_offer vs raw SKIP LOCKED claim, {sizes['runs']:,} runs "
        "per system per level",
        ["threads", "ours claims/s", "p50 ms", "p95 ms", "p99 ms",
         "raw claims/s", "raw p50", "raw p95", "raw p99", "ratio"],
    )  # fmt: skip
    for level in levels:
        ours, base = level["_ours"], level["_raw"]
        table.rows.append([
            str(level["threads"]), f"{ours.rate:,.0f}", ms(ours.pct(50)), ms(ours.pct(95)),
            ms(ours.pct(99)), f"{base.rate:,.0f}", ms(base.pct(50)),
            ms(base.pct(95)), ms(base.pct(99)), fmt_ratio(level["ratio"]),
        ])  # fmt: skip
    for level in levels:
        for key in ("_ours", "_raw", "_ack"):
            level.pop(key)
    checked = [lv for lv in levels if lv["threads"] in (8, 32)]
    missed = [lv for lv in checked if math.isnan(lv["ratio"]) or lv["ratio"] < TARGET]
    table.notes.append(
        "ratio = ours claims/s ÷ raw claims/s; target ≥ 0.7 at 8 and 32 threads: "
        + ("met" if not missed else "MISSED at " + ", ".join(str(lv["threads"]) for lv in missed))
    )
    table.notes.append(
        "both = 1 round trip per run taken out of the queue (ours: pull_offer incl. auth, "
        "fences, placement, lease + event + offer projection; raw: select + update + event)"
    )
    table.data = {"levels": levels, "target": TARGET}
    return [table]
