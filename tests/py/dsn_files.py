"""DSNs for child processes without a password on their command line.

`qinglong dev up` puts generated passwords in its DSNs, and every process's argv
is world-readable (`ps -ef`, `/proc/*/cmdline`), so tests hand such a DSN to a
`qinglong` subprocess through `--dsn-file` (a 0600 file) or `QINGLONG_DSN`.
"""

from __future__ import annotations

import os
from pathlib import Path


def dsn_file(directory: Path, name: str, dsn: str) -> str:
    """Write `dsn` to DIRECTORY/NAME, 0600 from creation and atomically (a reader
    never sees a half-written file); return the path for `--dsn-file`."""
    path = directory / name
    tmp = directory / f".{name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(dsn + "\n")
    os.replace(tmp, path)
    return str(path)
