"""The one way a command takes a PostgreSQL DSN: `--dsn`, `--dsn-file` or the environment.

A password inside `--dsn` is visible to every local user in `/proc/*/cmdline`
(`ps -ef`), so every command that talks to PostgreSQL also reads its DSN from a
file (`--dsn-file FILE`, first line, surrounding whitespace stripped) or from the
environment variable `QINGLONG_DSN` — the documented ways to pass a password.
Precedence: `--dsn`, then `--dsn-file`, then `QINGLONG_DSN`. The resolved value
lands in `args.dsn`, so handlers never care where it came from.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

DSN_ENV = "QINGLONG_DSN"
_REQUIRED = "_dsn_required"
MAX_DSN_FILE_BYTES = 64 * 1024


class DsnError(ValueError):
    """No DSN, an unreadable file, or an empty one: the message names the source."""


def add_dsn_argument(
    parser: argparse.ArgumentParser,
    *,
    required: bool = True,
    help: str = "PostgreSQL connection string",
) -> None:
    """`--dsn` / `--dsn-file` on `parser`; resolution happens in `resolve_dsn`."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--dsn",
        default=None,
        help=f"{help} (or --dsn-file, or ${DSN_ENV}; prefer those when the DSN holds a password)",
    )
    group.add_argument(
        "--dsn-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="read the DSN from the first line of FILE",
    )
    parser.set_defaults(**{_REQUIRED: required})


def _read_dsn_file(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_DSN_FILE_BYTES + 1)
    except OSError as exc:
        raise DsnError(f"--dsn-file {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_DSN_FILE_BYTES:
        raise DsnError(f"--dsn-file {path}: larger than {MAX_DSN_FILE_BYTES} bytes")
    lines = raw.decode("utf-8", errors="strict").splitlines() if raw else []
    dsn = lines[0].strip() if lines else ""
    if not dsn:
        raise DsnError(f"--dsn-file {path}: empty")
    return dsn


def dsn_from(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """The DSN `args` names, or None when no source gives one."""
    if getattr(args, "dsn", None):
        return str(args.dsn)
    path = getattr(args, "dsn_file", None)
    if path is not None:
        try:
            return _read_dsn_file(path)
        except UnicodeDecodeError:
            raise DsnError(f"--dsn-file {path}: not UTF-8") from None
    value = environ.get(DSN_ENV, "").strip()
    return value or None


def resolve_dsn(
    args: argparse.Namespace,
    parser: argparse.ArgumentParser,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Fill `args.dsn` in place; a missing required DSN is a usage error (exit 2)."""
    if not hasattr(args, _REQUIRED):
        return
    try:
        dsn = dsn_from(args, os.environ if environ is None else environ)
    except DsnError as exc:
        parser.error(str(exc))
    if dsn is None and getattr(args, _REQUIRED):
        parser.error(f"a DSN is required: --dsn, --dsn-file FILE or ${DSN_ENV}")
    args.dsn = dsn
