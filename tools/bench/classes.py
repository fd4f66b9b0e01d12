"""`bench classes`: a blocked pull's cost with 5,000 stale placement classes.

A placement class is one distinct required placement ever enqueued (migration
0006); a pull whose first page holds no run its session can take continues on
the classes it matches (ql_private.matching_classes -> class_candidate_page).
Classes only grow until retention prunes the unused ones (ql.prune_fleet), so a
long-lived database holds many whose runs are long gone. Both cases queue
`blocked` runs no session can take (required gpu=yes) ahead of `matching` plain
runs, so every pull takes the class path; the second case adds 5,000 stale
classes (distinct required labels, no run) as a database that saw 5,000
placements would hold. One connection pulls (pull + starting ACK) `claims`
times; the pull's latency with the stale classes must stay within 1.5 x the
case without them: only classes with waiting runs are evaluated
(ql_private.waiting_classes: skip scans of runs_class_keyset / runs_class_due).
"""

from __future__ import annotations

from typing import Any

import psycopg

from tools.bench.common import Api, BenchContext, Table, fmt_ratio, ratio, vacuum
from tools.bench.depth import _measure

FULL = {"blocked": 10_000, "matching": 5_000, "claims": 2000, "threads": 1}
QUICK = {"blocked": 1_000, "matching": 500, "claims": 200, "threads": 1}
STALE_CLASSES = 5_000
P50_TARGET = 1.5  # p50 pull latency with the stale classes <= 1.5 x without

_STALE = """
INSERT INTO ql_private.placement_classes (required)
SELECT jsonb_build_object('executors', '["remote-worker"]'::jsonb,
                          'labels', jsonb_build_object('gpu', jsonb_build_array('v' || i)),
                          'runtimes', '{}'::jsonb)
  FROM generate_series(1, %s) i
"""


def _case(ctx: BenchContext, label: str, sizes: dict, stale: int) -> dict[str, Any]:
    with ctx.fresh_db() as dsn:
        with psycopg.connect(dsn, autocommit=True) as conn:
            api = Api(conn)
            api.enqueue(ctx.tasks["blocked"], sizes["blocked"])
            api.enqueue(ctx.tasks["plain"], sizes["matching"])
            if stale:
                conn.execute(_STALE, (stale,))
            classes = conn.execute("SELECT count(*) FROM ql_private.placement_classes").fetchone()
        vacuum(
            dsn,
            "ql_private.runs",
            "ql_private.attempts",
            "ql_private.events",
            "ql_private.placement_classes",
        )
        timings, outcomes = _measure(ctx, dsn, sizes["threads"], sizes["claims"])
    return {"case": label, "classes": classes[0] if classes else 0,
            "claimsPerS": timings.rate, "p50Ms": timings.pct(50) * 1000,
            "p95Ms": timings.pct(95) * 1000, "p99Ms": timings.pct(99) * 1000,
            "outcomes": outcomes}  # fmt: skip


def run(ctx: BenchContext) -> list[Table]:
    sizes = QUICK if ctx.quick else FULL
    head = f"{sizes['blocked']:,} blocked ahead of {sizes['matching']:,}"
    cases = [
        _case(ctx, head, sizes, 0),
        _case(ctx, f"{head}, + {STALE_CLASSES:,} stale classes", sizes, STALE_CLASSES),
    ]
    base = cases[0]
    table = Table(
        f"classes: {sizes['claims']:,} pulls by {sizes['threads']} connection per case, "
        "every pull past a blocked first page",
        ["case", "classes", "claims/s", "pull p50 ms", "p95", "p99", "p50 ratio", "outcomes"],
    )
    for case in cases:
        case["p50Ratio"] = ratio(case["p50Ms"], base["p50Ms"])
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(case["outcomes"].items()))
        table.rows.append([
            case["case"], f"{case['classes']:,}", f"{case['claimsPerS']:,.0f}",
            f"{case['p50Ms']:.2f}", f"{case['p95Ms']:.2f}", f"{case['p99Ms']:.2f}",
            fmt_ratio(case["p50Ratio"]), outcomes,
        ])  # fmt: skip
    stale_ratio = cases[-1]["p50Ratio"]
    verdict = "met" if stale_ratio == stale_ratio and stale_ratio <= P50_TARGET else "MISSED"
    table.notes.append(
        f"target: pull p50 with {STALE_CLASSES:,} stale classes <= {P50_TARGET} x without: "
        f"{verdict} (only classes with waiting runs are evaluated: ql_private.waiting_classes)"
    )
    table.data = {"cases": cases, "pulls": sizes["claims"], "threads": sizes["threads"]}
    return [table]
