"""`qinglong runtime sweep` (SPEC §7, §8, §9.6): control-plane runtime services.

Only argparse here: cli.py imports this module to build the parser of every
`qinglong` command (the worker's included); the sweeper (service.sweeper,
psycopg) loads when its command runs, so `--help` and argument errors load no
database code.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from qinglong.cli import Subparsers
from qinglong.dsn_option import add_dsn_argument

LazyFactory = Callable[[str], Callable[[argparse.Namespace], int]]

MIN_EVERY_S = 0.1
MAX_EVERY_S = 3600.0
MAX_BATCH = 5000  # ql.sweep_leases refuses more (QL002)
MAX_PRUNE_BATCH = 10000  # ql.prune_runs / ql.prune_audit refuse more (QL006)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_every(text: str) -> float:
    """`5s`, `500ms`, `1.5s`, `2m`, `1h` or a plain number of seconds."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 5s, 500ms, 1m)")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
    if not MIN_EVERY_S <= seconds <= MAX_EVERY_S:
        raise argparse.ArgumentTypeError(
            f"--every must be between {MIN_EVERY_S:g}s and {MAX_EVERY_S:g}s"
        )
    return seconds


def parse_batch(text: str, most: int = MAX_BATCH, flag: str = "--batch") -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= most:
        raise argparse.ArgumentTypeError(f"{flag} must be between 1 and {most}")
    return value


def parse_prune_batch(text: str) -> int:
    return parse_batch(text, MAX_PRUNE_BATCH, "--prune-batch")


def parse_retention(text: str) -> int:
    """`N[smhd]` in whole seconds (`0s` = everything terminal)."""
    from qinglong.durations import parse_duration_s

    try:
        return parse_duration_s(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub: Subparsers, lazy: LazyFactory) -> None:
    runtime = sub.add_parser("runtime", help="control-plane runtime services (lease sweeper)")
    commands = runtime.add_subparsers(dest="runtime_command", required=True)
    sweep = commands.add_parser(
        "sweep",
        help="expire leases (unstarted offers become claimable, started ones are lost/"
        "retried) and prune terminal runs and audit rows past retention",
        description="Call ql.sweep_leases until no expired lease is left, then prune in "
        "batches (ql.prune_runs, ql.prune_audit, ql.prune_fleet; one transaction each, "
        "never blocking "
        "claims), log one JSON line per pass on stdout, sleep, repeat. Stateless: run it on "
        "every replica. SIGTERM stops it after the call in flight.",
    )
    add_dsn_argument(sweep, help="PostgreSQL DSN of a login in ql_sweeper (or ql_runtime)")
    sweep.add_argument(
        "--every",
        type=parse_every,
        default=5.0,
        metavar="DURATION",
        help="pause between passes: 5s (default), 500ms, 1m; 100ms..1h",
    )
    sweep.add_argument(
        "--batch",
        type=parse_batch,
        default=500,
        metavar="N",
        help="leases per database call, 1..5000 (default 500)",
    )
    sweep.add_argument(
        "--retain-runs",
        type=parse_retention,
        default=14 * 86400,
        metavar="DURATION",
        help="prune terminal runs finished longer ago than N[smhd], and "
        "sessions and worker/session events that ended before it "
        "(default 14d)",
    )
    sweep.add_argument(
        "--retain-audit",
        type=parse_retention,
        default=30 * 86400,
        metavar="DURATION",
        help="prune security_audit rows older than N[smhd] (default 30d)",
    )
    sweep.add_argument(
        "--prune-batch",
        type=parse_prune_batch,
        default=1000,
        metavar="N",
        help="rows per prune transaction, 1..10000 (default 1000)",
    )
    sweep.add_argument(
        "--once", action="store_true", help="one pass, then exit (0 ok, 1 database error)"
    )
    sweep.set_defaults(handler=lazy("qinglong.service.sweeper:sweep_command"))
