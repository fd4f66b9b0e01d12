"""`bench depth`: claim latency and throughput as the queue grows.

Per depth (full: 10k, 100k, 1M queued runs; --quick: 1k, 10k) a fresh database
is filled through ql.enqueue_runs in batches of 10,000, vacuumed and analyzed;
then `threads` connections claim `claims` runs (pull + starting ACK, two warm-up
claims per connection first). A last case queues `blocked` runs whose placement
no session satisfies (required gpu=yes) ahead of 10k (quick: 1k) matching runs
and makes the same number of pulls: the pulls must reach the matching runs
behind that head (placement-class pages). A scheduled case queues `scheduled`
runs due in an hour (ql.enqueue_runs p_delay_ms, SPEC §9.2) ahead of 10k
(quick: 1k) ready runs of the same priority and makes the same pulls: runs not
yet due sit outside the candidate keyset (runs.due_at, runs_due) and must not be
walked. A pools case (SPEC §13.3) spreads the queue over 1,000 pools (full: 100
runs each; quick: 10) and lets the measuring workers hold a grant of one pool
only (their all-pools grant revoked): the pull reads that pool's keyset
(runs_pool_keyset) and never the others'. Every figure is also given as a ratio
to the shallowest case: the pull's cost must not grow with depth (SPEC §3.1);
targets: >= 0.8 at the deepest queue, >= 0.8 with the scheduled head, >= 0.5
with the blocked head, >= 0.8 with 1,000 pools and one granted.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg

from qinglong.db import api as db_api
from tools.bench.common import (
    Api,
    BenchContext,
    Claimer,
    Table,
    Timings,
    fmt_ratio,
    ratio,
    run_threads,
    vacuum,
    warm_up,
)

FULL = {
    "depths": [10_000, 100_000, 1_000_000],
    "blocked": 100_000,
    "scheduled": 100_000,
    "claims": 2000,
    "threads": 4,
    "pools": 1_000,
    "per_pool": 100,
}
QUICK = {
    "depths": [1_000, 10_000],
    "blocked": 10_000,
    "scheduled": 10_000,
    "claims": 200,
    "threads": 4,
    "pools": 1_000,
    "per_pool": 10,
}
SCHEDULED_DELAY_MS = 3_600_000  # due in an hour: never due during the case
ENQUEUE_BATCH = 10_000  # ql.enqueue_runs' cap per call
WARMUP = 2
DEPTH_TARGET = 0.8
BLOCKED_TARGET = 0.5
SCHEDULED_TARGET = 0.8
POOLS_TARGET = 0.8


def _verdict(value: float, target: float) -> str:
    return "met" if value == value and value >= target else "MISSED"


def _measure(ctx: BenchContext, dsn: str, threads: int, pulls: int) -> tuple[Timings, dict]:
    per_thread = max(1, pulls // threads)
    pools = [ctx.workers[i::threads] for i in range(threads)]
    claimers: list[Claimer] = []
    lock = threading.Lock()

    def work(index: int, barrier: threading.Barrier) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            claimer = Claimer(Api(conn), pools[index])
            warm_up(claimer, WARMUP)  # plan caches are per connection: fill them first
            barrier.wait()
            for _ in range(per_thread):
                claimer.step()
            with lock:
                claimers.append(claimer)

    wall = run_threads(threads, work)
    timings = Timings(wall_s=wall)
    outcomes: dict[str, int] = {}
    for claimer in claimers:
        timings.latencies += claimer.pull_times
        for key, value in claimer.outcomes.items():
            outcomes[key] = outcomes.get(key, 0) + value
    timings.count = outcomes.get("offered", 0)
    return timings, outcomes


def _enqueue_scheduled(api: Api, task_id: str, count: int) -> None:
    left = count
    while left > 0:
        batch = min(left, ENQUEUE_BATCH)
        api.one(
            db_api.enqueue_runs(
                task_id=task_id, priority=0, count=batch, delay_ms=SCHEDULED_DELAY_MS
            )
        )
        left -= batch


def _case(
    ctx: BenchContext, label: str, fill: list[tuple[str, int]], sizes: dict, scheduled: int = 0
) -> dict:
    with ctx.fresh_db() as dsn:
        started = time.monotonic()
        with psycopg.connect(dsn, autocommit=True) as conn:
            api = Api(conn)
            if scheduled:  # queued first: ahead of the ready runs in queue order
                _enqueue_scheduled(api, ctx.tasks["plain"], scheduled)
            for task, count in fill:
                api.enqueue(ctx.tasks[task], count)
        vacuum(dsn, "ql_private.runs", "ql_private.attempts", "ql_private.events")
        fill_s = time.monotonic() - started
        timings, outcomes = _measure(ctx, dsn, sizes["threads"], sizes["claims"])
    return {"case": label, "queued": sum(n for _, n in fill) + scheduled,
            "fillS": round(fill_s, 1),
            "claimsPerS": timings.rate, "pullsPerS": len(timings.latencies) / timings.wall_s,
            "p50Ms": timings.pct(50) * 1000, "p95Ms": timings.pct(95) * 1000,
            "p99Ms": timings.pct(99) * 1000, "outcomes": outcomes}  # fmt: skip


def _fill_pools(ctx: BenchContext, api: Api, sizes: dict) -> int:
    """`pools` pools of project `bench`, `per_pool` queued runs each (the granted
    one, `bench/pool-0`, holds enough for every measured claim too); the template's
    workers lose their all-pools grant and hold `bench/pool-0` alone."""
    from qinglong.service.compiler import compile_command
    from tools.bench.common import command

    canonical = compile_command(command(None)).canonical
    queued = 0
    for number in range(sizes["pools"]):
        name = f"pool-{number}"
        api.one(db_api.create_pool(project="bench", name=name))
        task = api.one(
            db_api.publish_revision(
                project="bench", task=f"task-{number}", canonical=canonical, pool=f"bench/{name}"
            )
        ).task_id
        count = sizes["per_pool"] + (sizes["claims"] * 2 if number == 0 else 0)
        api.enqueue(task, count)
        queued += count
    for worker in ctx.workers:
        api.one(db_api.revoke_pool(worker_id=worker.worker_id, pool="*"))
        api.one(db_api.grant_pool(worker_id=worker.worker_id, pool="bench/pool-0"))
    return queued


def _pools_case(ctx: BenchContext, sizes: dict) -> dict:
    with ctx.fresh_db() as dsn:
        started = time.monotonic()
        with psycopg.connect(dsn, autocommit=True) as conn:
            queued = _fill_pools(ctx, Api(conn), sizes)
        vacuum(dsn, "ql_private.runs", "ql_private.attempts", "ql_private.events")
        fill_s = time.monotonic() - started
        timings, outcomes = _measure(ctx, dsn, sizes["threads"], sizes["claims"])
    return {"case": f"{sizes['pools']:,} pools ({queued:,} queued), one granted",
            "queued": queued, "fillS": round(fill_s, 1),
            "claimsPerS": timings.rate, "pullsPerS": len(timings.latencies) / timings.wall_s,
            "p50Ms": timings.pct(50) * 1000, "p95Ms": timings.pct(95) * 1000,
            "p99Ms": timings.pct(99) * 1000, "outcomes": outcomes}  # fmt: skip


def run(ctx: BenchContext) -> list[Table]:
    sizes = QUICK if ctx.quick else FULL
    cases: list[dict[str, Any]] = []
    for depth in sizes["depths"]:
        cases.append(_case(ctx, f"{depth:,} queued", [("plain", depth)], sizes))
    matching = sizes["depths"][0]
    blocked = sizes["blocked"]
    scheduled = sizes["scheduled"]
    cases.append(
        _case(
            ctx,
            f"{scheduled:,} due in 1 h ahead of {matching:,} ready",
            [("plain", matching)],
            sizes,
            scheduled=scheduled,
        )
    )
    cases.append(
        _case(
            ctx,
            f"{blocked:,} blocked ahead of {matching:,}",
            [("blocked", blocked), ("plain", matching)],
            sizes,
        )
    )
    cases.append(_pools_case(ctx, sizes))
    base = cases[0]
    table = Table(
        f"depth: {sizes['claims']:,} pulls by {sizes['threads']} connections per case",
        ["case", "claims/s", "ratio", "pull p50 ms", "p95", "p99", "p50 ratio", "outcomes"],
    )
    for case in cases:
        case["claimsRatio"] = ratio(case["claimsPerS"], base["claimsPerS"])
        case["p50Ratio"] = ratio(case["p50Ms"], base["p50Ms"])
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(case["outcomes"].items()))
        table.rows.append([
            case["case"], f"{case['claimsPerS']:,.0f}", fmt_ratio(case["claimsRatio"]),
            f"{case['p50Ms']:.2f}", f"{case['p95Ms']:.2f}", f"{case['p99Ms']:.2f}",
            fmt_ratio(case["p50Ratio"]), outcomes,
        ])  # fmt: skip
    deepest, scheduled_case, blocked_case, pools_case = cases[-4], cases[-3], cases[-2], cases[-1]
    table.notes.append(
        f"target: claims/s at the deepest queue >= {DEPTH_TARGET} x the {base['case']} case: "
        + _verdict(deepest["claimsRatio"], DEPTH_TARGET)
    )
    table.notes.append(
        f"target: claims/s with the scheduled head >= {SCHEDULED_TARGET} x the {base['case']} "
        "case: "
        + _verdict(scheduled_case["claimsRatio"], SCHEDULED_TARGET)
        + " (runs not yet due are outside the candidate keyset: runs.due_at, runs_due)"
    )
    table.notes.append(
        f"target: claims/s with the blocked head >= {BLOCKED_TARGET} x the {base['case']} case: "
        + _verdict(blocked_case["claimsRatio"], BLOCKED_TARGET)
        + " (a pull whose first page has no passing candidate continues on the placement "
        "classes its session matches: runs_class_keyset, one index descent per class)"
    )
    table.notes.append(
        f"target: claims/s with {sizes['pools']:,} pools and one granted >= {POOLS_TARGET} x "
        f"the {base['case']} case (single pool, all-pools grant): "
        + _verdict(pools_case["claimsRatio"], POOLS_TARGET)
        + " (the candidate keyset is per pool: runs_pool_keyset, SPEC 13.3)"
    )
    table.data = {"cases": cases, "pulls": sizes["claims"], "threads": sizes["threads"]}
    return [table]
