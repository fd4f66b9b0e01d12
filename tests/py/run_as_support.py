"""SPEC §11 in the suite: `worker run --execute` needs `--run-as`, for every worker.

As root (CI) the suite's commands run as an unprivileged user (`qlrun`, created
if missing, else `nobody`). Not as root, the suite passes the worker's own user
(explicitly accepting no isolation: the development mode, `worker.unisolated`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from qinglong.worker.run_as import ensure_unprivileged_user, local_run_as

__all__ = ["reachable_dir", "run_as_args", "run_as_user", "searchable_tmp"]


def run_as_user() -> str | None:
    """Whom a Sandbox switches to: None (not root) keeps the worker's identity."""
    return ensure_unprivileged_user() if os.geteuid() == 0 else None


def run_as_args() -> list[str]:
    """The `--run-as` arguments `worker run --execute` needs in this process."""
    return ["--run-as", local_run_as()]


def searchable_tmp(prefix: str) -> Path:
    """A fresh temp directory others may search but not list (0711), outside
    pytest's 0700 tree: a worker's runs directory below it is reachable by the
    run-as user (its commands' HOME), so `worker run` accepts it. The caller
    removes it."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o711)
    return path


@contextlib.contextmanager
def reachable_dir(prefix: str) -> Iterator[Path]:
    """:func:`searchable_tmp`, removed afterwards."""
    path = searchable_tmp(prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
