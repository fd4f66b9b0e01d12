"""CPU time of process trees from /proc, for the per-offer server cost of `bench e2e`.

A `CpuMeter` sums the CPU time (schedstat, else user + system) of the processes
below a set of roots (the roots included): the ingress supervisors and their
children, the PostgreSQL postmaster and every process it started (backends, walwriter, checkpointer,
autovacuum — what the server spends to serve the load). A process that exits
between two readings takes its CPU time with it, so a meter is read around a
phase whose serving processes outlive it (pooled connections do).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuMeter", "cpu_seconds", "descendants", "postmaster_pid"]

_TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    return text.rsplit(")", 1)[1].split()


def _schedstat_seconds(pid: int) -> float | None:
    """Time on CPU in nanoseconds (first field of /proc/PID/schedstat), as seconds."""
    try:
        text = Path(f"/proc/{pid}/schedstat").read_text(encoding="ascii")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return int(text.split()[0]) / 1e9


def cpu_seconds(pids: Iterable[int]) -> float:
    """CPU time of each live pid: /proc/PID/schedstat (nanoseconds) where the kernel
    has it, else utime + stime (fields 14 and 15 of /proc/PID/stat, clock ticks).
    Ticks are 10 ms: a short run's backends (600 quick claims over 8 connections,
    ~8 ms each) each read 0 ticks, and their sum 0."""
    total = 0.0
    for pid in pids:
        precise = _schedstat_seconds(pid)
        if precise is not None:
            total += precise
            continue
        fields = _stat_fields(pid)
        if fields is not None:
            total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


def descendants(roots: Iterable[int]) -> set[int]:
    """The roots and every live process below them (one scan of /proc)."""
    parent: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(int(entry.name))
            if fields is not None:
                parent[int(entry.name)] = int(fields[1])
    found = {pid for pid in roots if pid in parent}
    grew = True
    while grew:
        below = {pid for pid, ppid in parent.items() if ppid in found and pid not in found}
        found |= below
        grew = bool(below)
    return found


def postmaster_pid(data_dir: Path) -> int:
    """The first line of DATA/postmaster.pid."""
    return int((data_dir / "postmaster.pid").read_text(encoding="ascii").split()[0])


@dataclass
class CpuMeter:
    """CPU seconds of the trees below `roots`, read at `start()` and at `stop()`."""

    roots: tuple[int, ...]
    started: float = 0.0
    seconds: float = 0.0

    def _now(self) -> float:
        return cpu_seconds(descendants(self.roots))

    def start(self) -> None:
        self.started = self._now()

    def stop(self) -> float:
        self.seconds = max(0.0, self._now() - self.started)
        return self.seconds
