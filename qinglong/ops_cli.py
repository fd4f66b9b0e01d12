"""`qinglong demo`, `qinglong status` and `qinglong bench` (SPEC §8).

Only argparse here: cli.py imports this module to build the parser of every
`qinglong` command (the worker's included), so the implementations — psycopg,
subprocess orchestration, the benchmarks — load when their command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

LazyFactory = Callable[[str], Callable[[argparse.Namespace], int]]

BENCHMARKS = ("sql", "idle", "depth", "e2e", "edge", "soak")


def register(sub: argparse._SubParsersAction, lazy: LazyFactory) -> None:
    _demo(sub, lazy)
    _status(sub, lazy)
    _bench(sub, lazy)


def _demo(sub: argparse._SubParsersAction, lazy: LazyFactory) -> None:
    demo = sub.add_parser(
        "demo",
        help="everything on one machine: PostgreSQL, CA, ingress, N workers, live progress",
        description="Start an embedded throwaway PostgreSQL (unless --dsn), a dev CA, the "
        "ingress and N workers with different capabilities; publish tasks with placement, "
        "enqueue runs, show progress until every run is offered (or done with an executor), "
        "print a summary and remove everything (also on Ctrl-C).",
    )
    demo.add_argument("--dsn", help="use this PostgreSQL (superuser DSN; migrated first)")
    demo.add_argument("--workers", type=int, default=4, help="number of workers (1..16)")
    demo.add_argument("--runs", type=int, default=48, help="runs to enqueue (1..512)")
    demo.add_argument("--timeout", type=float, default=45.0,
                      help="give up waiting for progress after this many seconds")
    demo.add_argument("--keep", type=Path, help="keep logs and journals in this directory")
    demo.add_argument("--no-crash", action="store_true",
                      help="do not kill one worker after a pull response (the recovery scene)")
    demo.set_defaults(handler=lazy("qinglong.demo:demo_command"))


def _status(sub: argparse._SubParsersAction, lazy: LazyFactory) -> None:
    if "status" in sub.choices:  # registered by qinglong.status_cli
        return
    from qinglong.status_cli import register

    register(sub, lazy)


def _bench(sub: argparse._SubParsersAction, lazy: LazyFactory) -> None:
    bench = sub.add_parser(
        "bench",
        help="benchmarks: sql, idle, depth, e2e, edge, soak (appends to docs/BENCHMARKS.md)",
        description="Run one or all sub-benchmarks against an embedded throwaway PostgreSQL, "
        "print a table each and append a dated section to docs/BENCHMARKS.md.",
    )
    bench.add_argument("which", nargs="*", metavar="NAME",
                       help=f"sub-benchmarks to run ({', '.join(BENCHMARKS)}; default all but the "
                            "10-minute soak)")
    bench.add_argument("--quick", action="store_true",
                       help="small sizes (CI: checks the harness, not the figures)")
    bench.add_argument("--report", type=Path, default=None,
                       help="markdown file to append to (default docs/BENCHMARKS.md; "
                       "'-' for none)")
    bench.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    bench.add_argument("--note", default="", help="a line added to the report section")
    bench.set_defaults(handler=lazy("qinglong.bench.cli:bench_command"))
