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
walked. Every figure is also given as a ratio to the shallowest case: the
pull's cost must not grow with depth (SPEC §3.1); targets: >= 0.8 at the
deepest queue, >= 0.8 with the scheduled head, >= 0.5 with the blocked head.
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

FULL = {"depths": [10_000, 100_000, 1_000_000], "blocked": 100_000, "scheduled": 100_000,
        "claims": 2000, "threads": 4}
QUICK = {"depths": [1_000, 10_000], "blocked": 10_000, "scheduled": 10_000, "claims": 200,
         "threads": 4}
SCHEDULED_DELAY_MS = 3_600_000  # due in an hour: never due during the case
ENQUEUE_BATCH = 10_000  # ql.enqueue_runs' cap per call
WARMUP = 2
DEPTH_TARGET = 0.8
BLOCKED_TARGET = 0.5
SCHEDULED_TARGET = 0.8


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
        api.one(db_api.enqueue_runs(task_id=task_id, priority=0, count=batch,
                                    delay_ms=SCHEDULED_DELAY_MS))
        left -= batch


def _case(ctx: BenchContext, label: str, fill: list[tuple[str, int]], sizes: dict,
          scheduled: int = 0) -> dict:
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


def run(ctx: BenchContext) -> list[Table]:
    sizes = QUICK if ctx.quick else FULL
    cases: list[dict[str, Any]] = []
    for depth in sizes["depths"]:
        cases.append(_case(ctx, f"{depth:,} queued", [("plain", depth)], sizes))
    matching = sizes["depths"][0]
    blocked = sizes["blocked"]
    scheduled = sizes["scheduled"]
    cases.append(_case(ctx, f"{scheduled:,} due in 1 h ahead of {matching:,} ready",
                       [("plain", matching)], sizes, scheduled=scheduled))
    cases.append(_case(ctx, f"{blocked:,} blocked ahead of {matching:,}",
                       [("blocked", blocked), ("plain", matching)], sizes))
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
    deepest, scheduled_case, blocked_case = cases[-3], cases[-2], cases[-1]
    table.notes.append(
        f"target: claims/s at the deepest queue >= {DEPTH_TARGET} x the {base['case']} case: "
        + _verdict(deepest["claimsRatio"], DEPTH_TARGET))
    table.notes.append(
        f"target: claims/s with the scheduled head >= {SCHEDULED_TARGET} x the {base['case']} "
        "case: " + _verdict(scheduled_case["claimsRatio"], SCHEDULED_TARGET)
        + " (runs not yet due are outside the candidate keyset: runs.due_at, runs_due)")
    table.notes.append(
        f"target: claims/s with the blocked head >= {BLOCKED_TARGET} x the {base['case']} case: "
        + _verdict(blocked_case["claimsRatio"], BLOCKED_TARGET)
        + " (a pull whose first page has no passing candidate continues on the placement "
        "classes its session matches: runs_class_keyset, one index descent per class)")
    table.data = {"cases": cases, "pulls": sizes["claims"], "threads": sizes["threads"]}
    return [table]
