"""`python -m tools.chaos soak|drill|check` (docs/RELIABILITY.md), run from a checkout.

Only argparse here; the soak and the checker load when their command runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

Handler = Callable[[argparse.Namespace], int]
STRICT_HELP = "count matches of known bugs (checker KNOWN_ISSUES) as anomalies"


def _lazy(target: str) -> Handler:
    module_name, func_name = target.split(":")

    def run(args: argparse.Namespace) -> int:
        return int(getattr(importlib.import_module(module_name), func_name)(args))

    return run


def build_parser() -> argparse.ArgumentParser:
    chaos = argparse.ArgumentParser(
        prog="python -m tools.chaos", description="chaos soak and its offline checker"
    )
    commands = chaos.add_subparsers(dest="chaos_command", required=True)
    soak = commands.add_parser(
        "soak",
        help="run the system on loopback under faults, then check the history",
        description="Throwaway PostgreSQL, 3 ingresses behind a fault-injecting proxy, 12 "
        "workers, the sweeper; SIGKILLs, PostgreSQL immediate restarts, dropped responses, "
        "latency spikes; then heal, snapshot and check. Exit 0 only with zero anomalies "
        "and enough pulls.",
    )
    length = soak.add_mutually_exclusive_group()
    length.add_argument(
        "--short",
        dest="plan",
        action="store_const",
        const="short",
        help="CI size: >= 2,000 pulls in about 3-4 minutes (default)",
    )
    length.add_argument(
        "--long",
        dest="plan",
        action="store_const",
        const="long",
        help=">= 20,000 pulls (about 15-25 minutes)",
    )
    soak.set_defaults(plan="short")
    soak.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for history, snapshots, journals and logs (default: a new temp dir, kept)",
    )
    soak.add_argument("--seed", type=int, default=None, help="seed of the fault schedule")
    soak.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="S",
        help="override the minimum fault-phase length in seconds",
    )
    soak.add_argument(
        "--min-pulls", type=int, default=None, metavar="N", help="override the pull target"
    )
    soak.add_argument("--strict", action="store_true", help=STRICT_HELP)
    soak.set_defaults(handler=_lazy("tools.chaos.cli:soak_command"))
    mutate = commands.add_parser(
        "mutate",
        help="apply each mutant (tools/chaos/mutants) to a copy and run the short soak on it",
        description="For each mutant patch: copy the checkout, apply the patch (a mutant that "
        "no longer applies fails the command), run the short soak against the copy, and "
        "report which anomaly caught it. Prints 'K of N mutants caught'; exit 0 only when "
        "all are caught.",
    )
    mutate.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only this mutant (file name without .patch); repeatable",
    )
    mutate.add_argument(
        "--check", action="store_true", help="only verify that every mutant applies to the checkout"
    )
    mutate.add_argument(
        "--keep",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep each mutant's copy, soak output and log under DIR",
    )
    mutate.add_argument("--seed", type=int, default=None, help="seed of every soak")
    mutate.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="S",
        help="override the soak's minimum fault-phase length",
    )
    mutate.add_argument(
        "--min-pulls", type=int, default=None, metavar="N", help="override the soak's pull target"
    )
    mutate.set_defaults(handler=_lazy("tools.chaos.cli:mutate_command"))
    drill = commands.add_parser(
        "drill",
        help="availability drill: Patroni failover, switchover, ingress loss (SPEC 17.3)",
        description="etcd, two Patroni-managed PostgreSQL 15 nodes (synchronous_mode_strict) "
        "and HAProxy in front of two ingresses, on loopback from Debian packages (installed "
        "with apt-get when missing); real executing workers; SIGKILL the leader, a planned "
        "switchover, SIGKILL an ingress; the checker over the whole history. Prints, last, "
        "one JSON object {faults: [{kind, timeToOfferS}], lostClaims, doubleLeases, "
        "nonTerminalRuns, anomalies}; exit 0 only when all counts are 0 and every fault "
        "met its target (30 s failover, 5 s switchover and ingress loss).",
    )
    drill.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for history, snapshots, journals and logs (default: a new temp dir, kept)",
    )
    drill.add_argument("--seed", type=int, default=None, help="seed of the enqueue choices")
    drill.set_defaults(handler=_lazy("tools.chaos.drill:drill_command"))
    check = commands.add_parser("check", help="check a soak's HISTORY_DIR offline")
    check.add_argument("history_dir", type=Path, metavar="HISTORY_DIR")
    check.add_argument("--strict", action="store_true", help=STRICT_HELP)
    check.set_defaults(handler=_lazy("tools.chaos.cli:check_command"))
    return chaos


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
