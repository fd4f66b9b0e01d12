"""`qinglong admin run log --run ID [--attempt N] [--follow] [--json]` (SPEC §15.3).

Prints the attempt's stored log as it is (UTF-8 bytes, nothing added), then, when
the log was truncated or is shorter than the attempt's reported `logBytes`, one
last line `[qinglong: log truncated at N bytes]` or `[qinglong: log incomplete:
N of M bytes stored]` (qinglong.log_text). `--json` prints one object instead:
`{runId, attemptNumber, text, storedBytes, logBytes, truncated, complete}`.

`--follow` keeps reading (`ql.run_log` from the next offset every
FOLLOW_POLL_S) and prints new text as it is stored until the attempt ends, then
the trailer; with `--json` it prints the document once the attempt ended.
Without `--attempt` the run's latest attempt at the first read is the one read.
Errors are the JSON lines of every `admin` command (unknown run or attempt:
not_found, exit 1; a malformed argument: exit 2). Works with a ql_readonly DSN.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, BinaryIO

from qinglong.admin_cli import AdminError, guarded, optional_integer, uuid_arg
from qinglong.cli import Subparsers
from qinglong.log_text import LogPage, read_pages, trailer_block, whole

LazyFactory = Callable[[str], Callable[[argparse.Namespace], int]]
EXIT_INTERRUPTED = 130


def add_parser(runs: Subparsers, lazy: LazyFactory, dsn: Callable[..., None]) -> None:
    log = runs.add_parser("log", help="an attempt's live log as stored (SPEC 15.3)")
    dsn(log, read=True)
    log.add_argument("--run", required=True, help="run id")
    log.add_argument("--attempt", help="attempt number (default: the run's latest)")
    log.add_argument(
        "--follow",
        action="store_true",
        help="print new text as it is stored until the attempt ends",
    )
    log.add_argument(
        "--json",
        action="store_true",
        help="one JSON object {runId, attemptNumber, text, storedBytes, "
        "logBytes, truncated, complete} instead of the text",
    )
    log.set_defaults(handler=lazy("qinglong.admin_logs:run_log"))


class _TextOut:
    """Writes the log's text as UTF-8 bytes, remembering its last character."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.last_char = ""

    def write(self, text: str) -> None:
        if text:
            self.stream.write(text.encode("utf-8"))
            self.stream.flush()
            self.last_char = text[-1]


def _printed(_doc: dict[str, Any]) -> int:
    return 0


def run_log(args: argparse.Namespace) -> int:
    from qinglong.db import api
    from qinglong.db.answers import AnswerError
    from qinglong.service import control_plane

    def action() -> dict[str, Any]:
        run_id = uuid_arg(args.run, "runId")
        attempt = optional_integer(args.attempt, "attempt", 1)
        with control_plane.connect(args.dsn) as conn:

            def fetch(attempt_no: int | None, offset: int) -> LogPage:
                try:
                    return control_plane.run(
                        conn, api.run_log(run_id=run_id, attempt_no=attempt_no, offset=offset)
                    )
                except AnswerError as exc:
                    raise AdminError("database_error", "bad_log_document", exc.detail) from None

            pages = read_pages(fetch, attempt, follow=args.follow)
            if args.json:
                return whole(list(pages))
            out = _TextOut(sys.stdout.buffer)
            last = None
            for last in pages:
                out.write(last.text)
            line = None if last is None else last.trailer()
            if line is not None:
                out.write(trailer_block(out.last_char, line))
        return {}

    try:
        return guarded(action) if args.json else guarded(action, _printed)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
