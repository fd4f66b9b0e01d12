"""`qinglong api serve --config FILE [--processes N]`: the producer API (SPEC §13.4;
the implementation lives in service.producer_app)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from qinglong.cli import Subparsers

Handler = Callable[[argparse.Namespace], int]


def register(sub: Subparsers, lazy: Callable[[str], Handler]) -> None:
    api = sub.add_parser("api", help="the producer API (HTTPS, project tokens)")
    commands = api.add_subparsers(dest="api_command", required=True)
    serve = commands.add_parser("serve", help="run the producer API until SIGTERM")
    serve.add_argument(
        "--config",
        required=True,
        help="JSON config file (service/producer_config.py); QL_API_* "
        "overrides. It holds the DSN: keep it 0600",
    )
    serve.add_argument(
        "--processes",
        type=_positive,
        default=None,
        metavar="N",
        help="processes sharing the port (SO_REUSEPORT) under a supervisor; default 1",
    )
    serve.set_defaults(handler=lazy("qinglong.service.producer_app:serve_command"))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a whole number") from None
    if not 1 <= value <= 256:
        raise argparse.ArgumentTypeError("must be 1..256")
    return value
