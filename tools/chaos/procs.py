"""Supervised child processes, each the leader of its own process group.

Every child starts with `start_new_session=True`, so a signal to its group
reaches anything it spawned and nothing of ours. `Supervisor.stop_all` is what
every `finally` of the soak calls: SIGCONT (a frozen child cannot act on
SIGTERM), SIGTERM to every group, a bounded wait, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

STOP_TIMEOUT_S = 20.0

__all__ = ["Child", "Supervisor"]


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    expected_exit: bool = False  # set before we kill/stop it on purpose

    def start(self) -> None:
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                self.argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, close_fds=True,
            )  # fmt: skip
        self.starts += 1
        self.expected_exit = False

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def signal_group(self, signum: int) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)

    def kill(self) -> None:
        """SIGKILL the group and reap it (a power cut for the process)."""
        self.expected_exit = True
        self.signal_group(signal.SIGKILL)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)


@dataclass
class Supervisor:
    children: dict[str, Child] = field(default_factory=dict)

    def add(self, child: Child) -> Child:
        self.children[child.name] = child
        return child

    def stop(self, names: list[str], timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
        """SIGTERM the named children, wait, SIGKILL stragglers; return those killed."""
        running = [self.children[n] for n in names if self.children[n].alive]
        for child in running:
            child.expected_exit = True
            child.signal_group(signal.SIGCONT)
            child.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for child in running:
            assert child.process is not None
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(max(0.1, deadline - time.monotonic()))
        killed = [c.name for c in running if c.alive]
        for name in killed:
            self.children[name].kill()
        return killed

    def stop_all(self, timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
        return self.stop(list(self.children), timeout_s)
