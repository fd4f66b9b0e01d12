"""`qinglong worker run` (the implementation lives in worker.cli / worker.runner).

Only argparse and the argument definitions are loaded while building the
parser; the run loop, TLS and schemas load when the command runs (R-LAY-1).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from qinglong.cli import Subparsers

Handler = Callable[[argparse.Namespace], int]


def register(sub: Subparsers, lazy: Callable[[str], Handler]) -> None:
    from qinglong.worker.cli import add_run_arguments

    worker = sub.add_parser("worker", help="the pull worker runtime")
    commands = worker.add_subparsers(dest="worker_command", required=True)
    run = commands.add_parser(
        "run",
        help="pull offers into the journal's inbox until SIGTERM",
        description="Open a session, heartbeat it and pull offers one at a time into "
        "JOURNAL/inbox/<offerId>.json. SIGTERM/SIGINT drain and exit 0.",
    )
    add_run_arguments(run)
    run.set_defaults(handler=lazy("qinglong.worker.cli:run_command"))
