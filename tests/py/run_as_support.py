"""SPEC §11 in the suite: as root (CI), `worker run --execute` needs `--run-as`.

The suite's commands run as an unprivileged user (`qlrun`, created if missing,
else `nobody`); not as root, the worker keeps its own user (development mode).
"""

from __future__ import annotations

import os

from qinglong.worker.run_as import ensure_unprivileged_user

__all__ = ["run_as_args", "run_as_user"]


def run_as_user() -> str | None:
    return ensure_unprivileged_user() if os.geteuid() == 0 else None


def run_as_args() -> list[str]:
    """The `--run-as` arguments `worker run --execute` needs in this process."""
    user = run_as_user()
    return ["--run-as", user] if user else []
