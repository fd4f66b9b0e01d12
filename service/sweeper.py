"""`qinglong runtime sweep --dsn DSN [--every 5s] [--batch N] [--once]
[--retain-runs 14d] [--retain-audit 30d] [--prune-batch N]` (SPEC §7, §9.6).

The lease sweeper is stateless: every pass calls `ql.sweep_leases(batch)` until
the database says `more: false`, then prunes: `ql.prune_runs` (terminal runs
finished before the retention, with their attempts, leases and events),
`ql.prune_audit` (security_audit rows) and `ql.prune_fleet` (ended sessions and
worker/session events past the run retention, unused placement classes), batch
after batch, each call its own
transaction (SKIP LOCKED: a prune never waits for a claim), then sleeps. All
lease decisions (what expired, what is lost, retries, cancellations) and all
locking happen in ql.sweep_leases, which takes its rows with FOR UPDATE SKIP
LOCKED — so the sweeper can run on every replica at once, and a crash at any
point loses nothing (the transaction of the call in flight rolls back and the
next pass takes the same leases). Its DSN is a login IN ROLE ql_sweeper, which
may execute exactly these four functions (SPEC §13.6): an ingress host that
runs the sweeper holds no DSN that can publish or enqueue.

Output: one JSON line per pass on stdout — `{"timeMs", "event": "sweep.pass",
"expired", "lost", "retried", "failed", "cancelled", "skipped", "calls", "more",
"pruned": {runs, attempts, leases, events, securityAudit, sessions,
placementClasses, fleetEvents, calls, more},
"durationMs"}` — and one JSON line per failure on stderr (`event`
`sweep.error`, `reason` from the SQLSTATE table / service.control_plane).
A failed pass is retried on the next tick with a fresh connection; with
`--once` it ends the command with exit status 1.

SIGTERM / SIGINT stop the loop cleanly: a call in flight finishes (one
bounded transaction), then the command exits 0.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import psycopg

from qinglong.db import api
from qinglong.service.control_plane import (
    ControlPlaneError,
    PruneTotals,
    Retention,
    prune,
    translate,
)

COUNTS = ("expired", "lost", "retried", "failed", "cancelled", "skipped", "promoted")
# A pass keeps calling while the database reports more work, but never forever:
# a backlog larger than this is finished on the following passes.
MAX_CALLS_PER_PASS = 1000
# Prune batches per pass and kind: a large backlog (after an outage, or when a
# retention is shortened) drains over several passes, lease sweeping between them.
MAX_PRUNE_CALLS_PER_PASS = 100
DEFAULT_RETENTION = Retention(runs_s=14 * 86400, audit_s=30 * 86400)
STATEMENT_TIMEOUT_MS = 30000


@dataclass
class PassResult:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    calls: int = 0
    more: bool = False


def sweep_pass(
    conn: psycopg.Connection, batch: int, stop: threading.Event, max_calls: int = MAX_CALLS_PER_PASS
) -> PassResult:
    """Call ql.sweep_leases until it reports no more work (or stop / max_calls)."""
    result = PassResult()
    while True:
        swept = api.sweep_leases(batch=batch).run(conn)  # autocommit: one round trip
        result.calls += 1
        for key, count in swept.counts.items():
            result.counts[key] += count
        result.more = swept.more
        if not result.more or stop.is_set() or result.calls >= max_calls:
            return result


class Sweeper:
    """The loop of `qinglong runtime sweep`; injectable streams and stop event."""

    def __init__(
        self,
        dsn: str,
        every_s: float,
        batch: int,
        *,
        retention: Retention = DEFAULT_RETENTION,
        out: TextIO | None = None,
        err: TextIO | None = None,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.dsn = dsn
        self.every_s = every_s
        self.batch = batch
        self.retention = retention
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.stop = stop or threading.Event()
        self.clock = clock
        self._conn: psycopg.Connection | None = None

    def _log(self, stream: TextIO, doc: dict[str, Any]) -> None:
        stream.write(
            json.dumps({"timeMs": int(self.clock() * 1000), **doc}, separators=(",", ":")) + "\n"
        )
        stream.flush()

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=10,
                application_name="qinglong-sweeper",
                options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
            )
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def run_pass(self) -> bool:
        """One pass; logs it. False when it failed (the connection is dropped)."""
        started = time.monotonic()
        try:
            result = sweep_pass(self._connection(), self.batch, self.stop)
            pruned = self._prune()
        except (psycopg.Error, ControlPlaneError) as exc:
            failure = translate(exc) if isinstance(exc, psycopg.Error) else exc
            self.close()
            self._log(
                self.err,
                {
                    "level": "error",
                    "event": "sweep.error",
                    "reason": failure.reason,
                    "sqlstate": failure.sqlstate,
                },
            )
            return False
        self._log(
            self.out,
            {
                "level": "info",
                "event": "sweep.pass",
                **result.counts,
                "calls": result.calls,
                "more": result.more,
                "pruned": _pruned_json(pruned),
                "durationMs": int((time.monotonic() - started) * 1000),
            },
        )
        return True

    def _prune(self) -> PruneTotals:
        if self.stop.is_set():
            return PruneTotals()
        return prune(self._connection(), self.retention, MAX_PRUNE_CALLS_PER_PASS)

    def run(self, once: bool = False) -> int:
        try:
            while True:
                ok = self.run_pass()
                if once:
                    return 0 if ok else 1
                if self.stop.wait(self.every_s):
                    return 0
        finally:
            self.close()


def _pruned_json(totals: PruneTotals) -> dict[str, Any]:
    doc: dict[str, Any] = totals.as_json()
    del doc["dryRun"]
    return doc | {"calls": totals.calls, "more": totals.more}


def sweep_command(args: argparse.Namespace) -> int:
    retention = Retention(
        runs_s=args.retain_runs, audit_s=args.retain_audit, batch=args.prune_batch
    )
    sweeper = Sweeper(args.dsn, args.every, args.batch, retention=retention)

    def request_stop(signum: int, _frame: object) -> None:
        sweeper._log(
            sweeper.err,
            {"level": "info", "event": "sweep.stopping", "signal": signal.Signals(signum).name},
        )
        sweeper.stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    return sweeper.run(once=args.once)
