"""`qinglong ingress serve --config FILE` (the implementation lives in service.serve)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from qinglong.cli import Subparsers

Handler = Callable[[argparse.Namespace], int]


def register(sub: Subparsers, lazy: Callable[[str], Handler]) -> None:
    ingress = sub.add_parser("ingress", help="the worker-facing HTTPS ingress")
    commands = ingress.add_subparsers(dest="ingress_command", required=True)
    serve = commands.add_parser("serve", help="run the ingress until SIGTERM")
    serve.add_argument(
        "--config",
        required=True,
        help="JSON config file (see service/config.py); QL_INGRESS_* overrides. "
        "It holds the DSN: keep it 0600 (or pass the DSN, password "
        "and all, as QL_INGRESS_DSN), never on a command line",
    )
    serve.add_argument(
        "--processes",
        type=_positive,
        default=None,
        metavar="N",
        help="ingress processes sharing the port (SO_REUSEPORT) under a "
        "supervisor; default: the CPU count; 1 = no supervisor",
    )
    serve.set_defaults(handler=lazy("qinglong.service.serve:serve_command"))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if not 1 <= value <= 256:
        raise argparse.ArgumentTypeError("must be 1..256")
    return value
