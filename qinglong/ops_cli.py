"""`qinglong demo`, `qinglong status`, and `bench`/`chaos` pointers (SPEC §8).

Only argparse here: cli.py imports this module to build the parser of every
`qinglong` command (the worker's included), so the implementations — psycopg,
subprocess orchestration, the benchmarks — load when their command runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from qinglong.cli import Subparsers
from qinglong.dsn_option import add_dsn_argument

LazyFactory = Callable[[str], Callable[[argparse.Namespace], int]]


def register(sub: Subparsers, lazy: LazyFactory) -> None:
    _demo(sub, lazy)
    _status(sub, lazy)
    _checkout_only(sub, lazy)


def _demo(sub: Subparsers, lazy: LazyFactory) -> None:
    demo = sub.add_parser(
        "demo",
        help="everything on one machine: PostgreSQL, CA, ingress, N workers, live progress",
        description="Start an embedded throwaway PostgreSQL (unless --dsn), a dev CA, the "
        "ingress and N workers with different capabilities; publish tasks with placement, "
        "enqueue runs, show progress until every run is offered (or done with an executor), "
        "print a summary and remove everything (also on Ctrl-C).",
    )
    add_dsn_argument(
        demo, required=False, help="use this PostgreSQL (superuser DSN; migrated first)"
    )
    demo.add_argument("--workers", type=int, default=4, help="number of workers (1..16)")
    demo.add_argument("--runs", type=int, default=48, help="runs to enqueue (1..512)")
    demo.add_argument(
        "--timeout",
        type=float,
        default=45.0,
        help="give up waiting for progress after this many seconds",
    )
    demo.add_argument("--keep", type=Path, help="keep logs and journals in this directory")
    demo.add_argument(
        "--no-crash",
        action="store_true",
        help="do not kill one worker after a pull response (the recovery scene)",
    )
    demo.add_argument(
        "--console-port",
        type=int,
        default=8088,
        metavar="PORT",
        help="serve the read-only console on 127.0.0.1:PORT during the demo "
        "(default 8088, or a free port when 8088 is taken; 0 = any)",
    )
    demo.add_argument("--no-console", action="store_true", help="do not serve the console")
    demo.set_defaults(handler=lazy("qinglong.demo:demo_command"))


def _status(sub: Subparsers, lazy: LazyFactory) -> None:
    if "status" in sub.choices:  # registered by qinglong.status_cli
        return
    from qinglong.status_cli import register

    register(sub, lazy)


def _checkout_only(sub: Subparsers, lazy: LazyFactory) -> None:
    """`qinglong bench` / `qinglong chaos`: developer tooling that lives in the
    repository's `tools/`, not in the wheel; these only say how to run it."""
    for name, what in (("bench", "benchmarks"), ("chaos", "chaos soak and checker")):
        parser = sub.add_parser(
            name, help=f"{what}: run `python -m tools.{name}` from a checkout", add_help=False
        )
        parser.add_argument("rest", nargs=argparse.REMAINDER)
        parser.set_defaults(handler=lazy("qinglong.ops_cli:needs_checkout"), tool=name)


def needs_checkout(args: argparse.Namespace) -> int:
    print(
        f"qinglong {args.tool}: developer tooling, not installed with the package; from a "
        f"checkout of the repository run: python -m tools.{args.tool} {' '.join(args.rest)}",
        file=sys.stderr,
    )
    return 2
