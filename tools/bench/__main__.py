"""`python -m tools.bench [sql|idle|depth|classes|ops|e2e|edge|fleet|soak|logs] [--quick]` (run
from a checkout).

Only argparse here; the benchmarks load when they run (cli.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCHMARKS = ("sql", "idle", "depth", "classes", "ops", "e2e", "edge", "fleet", "soak", "logs")


def build_parser() -> argparse.ArgumentParser:
    bench = argparse.ArgumentParser(
        prog="python -m tools.bench",
        description="Run one or all sub-benchmarks against an embedded throwaway PostgreSQL, "
        "print a table each and append a dated section to docs/BENCHMARKS-HISTORY.md.",
    )
    bench.add_argument(
        "which",
        nargs="*",
        metavar="NAME",
        help=f"sub-benchmarks to run ({', '.join(BENCHMARKS)}; default all but "
        "classes, the fleet, the 10-minute soak and logs)",
    )
    bench.add_argument(
        "--quick", action="store_true", help="small sizes (CI: checks the harness, not the figures)"
    )
    bench.add_argument(
        "--report",
        type=Path,
        default=None,
        help="markdown file to append to (default docs/BENCHMARKS-HISTORY.md; '-' for none)",
    )
    bench.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    bench.add_argument("--note", default="", help="a line added to the report section")
    soak = bench.add_argument_group("soak")
    soak.add_argument(
        "--retain-runs",
        default=None,
        metavar="DURATION",
        help="the soak sweeper's --retain-runs, N[smhd] (default 1m; --quick 5s)",
    )
    soak.add_argument(
        "--retain-audit",
        default=None,
        metavar="DURATION",
        help="the soak sweeper's --retain-audit, N[smhd] (default 1m; --quick 5s)",
    )
    soak.add_argument(
        "--soak-intervals",
        type=int,
        default=None,
        metavar="N",
        help="measured intervals (default 10 x 60 s; --quick 4 x 5 s): a shorter soak",
    )
    return bench


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from tools.bench.cli import bench_command

    return int(bench_command(args))


if __name__ == "__main__":
    sys.exit(main())
