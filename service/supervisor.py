"""`qinglong ingress serve --processes N` (N > 1): N ingress processes on one port.

The supervisor binds the port first (SO_REUSEPORT, never listening: it only
holds the number, so `port: 0` picks one port for all), then forks N children.
Each child is a whole ingress — its own event loop, database pool, idle view,
metrics — listening on that port with SO_REUSEPORT, so the kernel spreads new
connections over the children. The supervisor itself runs no event loop and
opens no database connection.

- A child reports its URLs on a pipe once listening; when all N have, the
  supervisor writes the ready file (`ingressUrl`, `adminUrl` of child 0,
  `adminUrls` of every child, `pid` = the supervisor, `childPids`) and prints
  the `listening` line.
- Admin listeners: child i serves /healthz, /readyz and /metrics (its own
  counters) on `adminPort + i` (or an ephemeral port each when `adminPort` is
  0): scrape every child; sums over children are the ingress's totals.
- A child that dies is restarted (backoff 0.5 s doubling to 30 s; reset once a
  child has lived 30 s). A child that dies before the first readiness means the
  configuration cannot serve: everything is stopped and the exit status is 2.
- SIGTERM/SIGINT: SIGTERM to every child, wait for their drain (up to
  `shutdown_timeout_s` + 5 s, then SIGKILL), exit 0. SIGHUP is forwarded (each
  child reloads its TLS material). Children get SIGTERM if the supervisor dies
  (PR_SET_PDEATHSIG), so no child outlives it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import logging
import os
import select
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from qinglong.service.config import IngressConfig

log = logging.getLogger("qinglong.ingress.supervisor")

ReadyReport = Callable[[dict[str, object]], None]
ChildMain = Callable[[IngressConfig, ReadyReport], int]

RESTART_BACKOFF_MIN_S = 0.5
RESTART_BACKOFF_MAX_S = 30.0
HEALTHY_AFTER_S = 30.0
STOP_GRACE_S = 5.0
_PR_SET_PDEATHSIG = 1


def write_ready_file(path: str, doc: dict[str, object]) -> None:
    """Atomically (rename) write the ready document."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".ready-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(doc, handle)
    os.replace(tmp, target)


def _reserve_port(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _die_with_parent(parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the supervisor died before prctl took effect
        os._exit(0)


@dataclass
class _Child:
    index: int
    pid: int = 0
    started: float = 0.0
    ready: dict[str, object] | None = None
    restart_at: float | None = None
    backoff_s: float = RESTART_BACKOFF_MIN_S


@dataclass
class _Signals:
    stop: bool = False
    hup: bool = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop = True

    def _on_hup(self, signum: int, frame: FrameType | None) -> None:
        self.hup = True


@dataclass
class Supervisor:
    config: IngressConfig
    processes: int
    child_main: ChildMain
    children: list[_Child] = field(default_factory=list)
    _signals: _Signals = field(default_factory=_Signals)
    _announced: bool = False
    _buffer: bytes = b""

    def child_config(self, index: int, port: int) -> IngressConfig:
        admin = self.config.admin_port + index if self.config.admin_port else 0
        return dataclasses.replace(self.config, port=port, admin_port=admin, ready_file=None)

    def run(self) -> int:
        try:
            reservation = _reserve_port(self.config.host, self.config.port)
        except OSError as exc:
            log.error(
                "ingress failed to start",
                extra={
                    "event": "ingress.start_failed",
                    "error": type(exc).__name__,
                    "detail": str(exc)[:200],
                },
            )
            return 2
        port = int(reservation.getsockname()[1])
        read_fd, write_fd = os.pipe()
        self._signals.install()
        self.children = [_Child(i) for i in range(self.processes)]
        try:
            for child in self.children:
                self._spawn(child, port, read_fd, write_fd, reservation)
            return self._watch(port, read_fd, write_fd, reservation)
        finally:
            self._stop_all()
            reservation.close()
            os.close(read_fd)
            os.close(write_fd)

    def _spawn(
        self, child: _Child, port: int, read_fd: int, write_fd: int, reservation: socket.socket
    ) -> None:
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 1
            try:
                os.close(read_fd)
                reservation.close()
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                # A SIGHUP forwarded before the child's loop handles it must not kill it.
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                _die_with_parent(parent)
                index = child.index

                def report(doc: dict[str, object]) -> None:
                    os.write(write_fd, json.dumps({"index": index, **doc}).encode() + b"\n")

                code = self.child_main(self.child_config(child.index, port), report)
            except BaseException:  # the child must never unwind into the supervisor
                log.exception("ingress process failed", extra={"event": "supervisor.child_failed"})
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        child.pid, child.started, child.ready, child.restart_at = pid, time.monotonic(), None, None
        log.info(
            "ingress process started",
            extra={"event": "supervisor.child_started", "index": child.index, "pid": pid},
        )

    def _watch(self, port: int, read_fd: int, write_fd: int, reservation: socket.socket) -> int:
        while not self._signals.stop:
            readable, _, _ = select.select([read_fd], [], [], 0.1)
            if readable:
                self._read_reports(read_fd)
            if self._signals.hup:
                self._signals.hup = False
                self._signal_children(signal.SIGHUP)
            if not self._reap():
                return 2
            now = time.monotonic()
            for child in self.children:
                if child.restart_at is not None and now >= child.restart_at:
                    self._spawn(child, port, read_fd, write_fd, reservation)
        log.info("shutting down", extra={"event": "ingress.stopping"})
        return 0

    def _read_reports(self, read_fd: int) -> None:
        self._buffer += os.read(read_fd, 65536)
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            doc = json.loads(line)
            child = self.children[int(doc.pop("index"))]
            if doc.get("pid") == child.pid:
                child.ready = doc
        if all(child.ready is not None for child in self.children):
            self._announce()

    def _announce(self) -> None:
        first = self.children[0].ready
        assert first is not None
        doc: dict[str, object] = {
            "ingressUrl": first["ingressUrl"],
            "adminUrl": first["adminUrl"],
            "adminUrls": [c.ready["adminUrl"] for c in self.children if c.ready],
            "pid": os.getpid(),
            "processes": self.processes,
            "childPids": [c.pid for c in self.children],
        }
        if self.config.ready_file:
            write_ready_file(self.config.ready_file, doc)
        if not self._announced:
            self._announced = True
            print(json.dumps({"event": "listening", **doc}), flush=True)
            log.info(
                "ingress listening",
                extra={"event": "ingress.listening", "processes": self.processes},
            )

    def _reap(self) -> bool:
        """Collect exited children and schedule restarts; False if one died
        before the first readiness (the configuration cannot serve)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if pid == 0:
                return True
            child = next((c for c in self.children if c.pid == pid), None)
            if child is None:
                continue
            child.pid, child.ready = 0, None
            lived = time.monotonic() - child.started
            log.error(
                "ingress process exited",
                extra={
                    "event": "supervisor.child_exited",
                    "index": child.index,
                    "pid": pid,
                    "status": os.waitstatus_to_exitcode(status),
                    "livedS": round(lived, 1),
                },
            )
            if not self._announced:
                return False
            if lived >= HEALTHY_AFTER_S:
                child.backoff_s = RESTART_BACKOFF_MIN_S
            child.restart_at = time.monotonic() + child.backoff_s
            child.backoff_s = min(RESTART_BACKOFF_MAX_S, child.backoff_s * 2)

    def _signal_children(self, sig: signal.Signals) -> None:
        for child in self.children:
            if child.pid:
                try:
                    os.kill(child.pid, sig)
                except ProcessLookupError:
                    pass

    def _stop_all(self) -> None:
        self._signal_children(signal.SIGTERM)
        deadline = time.monotonic() + self.config.shutdown_timeout_s + STOP_GRACE_S
        while any(c.pid for c in self.children):
            if time.monotonic() > deadline:
                self._signal_children(signal.SIGKILL)
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.05)
                continue
            for child in self.children:
                if child.pid == pid:
                    child.pid = 0
