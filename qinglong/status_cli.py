"""`qinglong status --dsn DSN [--json]` (SPEC §8): an operator's glance.

One call of `ql.status_snapshot()` (db/functions/status_snapshot.sql: bounded,
read-only, granted to ql_readonly and ql_runtime). `--json` prints the jsonb
exactly as the database returned it; otherwise a compact table. Errors are one
JSON object on stderr and exit 1, like the admin commands.

psycopg is imported inside the handler: cli.py imports this module to build its
parser for every command, the worker's included.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from qinglong.cli import Subparsers
from qinglong.dsn_option import add_dsn_argument

LazyFactory = Callable[[str], Callable[[argparse.Namespace], int]]
EXIT_ERROR = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_dsn_argument(parser, help="PostgreSQL DSN (ql_readonly is enough)")
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON")


def register(sub: Subparsers, lazy: LazyFactory) -> None:
    if "status" in sub.choices:  # ops_cli may have registered it already
        return
    status = sub.add_parser("status", help="queue depth, sessions, leases, denials")
    add_arguments(status)
    status.set_defaults(handler=lazy("qinglong.status_cli:status_command"))


def fetch_snapshot(dsn: str) -> dict[str, Any]:
    """`ql.status_snapshot()`; failures raise service ControlPlaneError."""
    from qinglong.db import api
    from qinglong.service.control_plane import connect, run

    with connect(dsn) as conn:
        return run(conn, api.status_snapshot()).doc


def status_command(args: argparse.Namespace) -> int:
    from qinglong.service.control_plane import ControlPlaneError

    try:
        snapshot = fetch_snapshot(args.dsn)
    except ControlPlaneError as exc:
        doc = {"error": "status_failed", "reason": exc.reason, "detail": exc.detail}
        sys.stderr.write(json.dumps(doc) + "\n")
        return EXIT_ERROR
    if args.json:
        print(json.dumps(snapshot))
    else:
        print(render(snapshot))
    return 0


# ------------------------------------------------------------------ rendering


def duration(ms: int | None) -> str:
    """Compact age: 850ms, 42s, 3m05s, 2h10m, 3d04h."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{max(ms, 0)}ms"
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def count(value: Any, capped: bool = False) -> str:
    text = f"{int(value or 0):,}"
    return text + "+" if capped else text


def table(headers: list[str], rows: Iterable[list[str]], indent: str = "  ") -> list[str]:
    rows = [list(map(str, row)) for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    for row in rows:
        lines.append(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return [line.rstrip() for line in lines]


def capabilities_text(labels: Mapping[str, Any], runtimes: Mapping[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in sorted(labels.items())]
    parts += [f"{k}@{v}" for k, v in sorted(runtimes.items())]
    return " ".join(parts) or "-"


def _queue_lines(queue: Mapping[str, Any]) -> list[str]:
    total = count(queue.get("runs"), bool(queue.get("capped")))
    if queue.get("estimate") is not None:
        total += f" (est. {count(queue['estimate'])})"
    lines = [
        f"queue     runs {total}  waiting {count(queue.get('waiting'), bool(queue.get('capped')))}"
        f"  offered {count(queue.get('offered'))}"
        f"  oldest waiting {duration(queue.get('oldestWaitingAgeMs'))}"
    ]
    priorities = queue.get("byPriority") or []
    if priorities:
        lines += table(
            ["priority", "runs", "oldest waiting"],
            (
                [
                    str(p["priority"]),
                    count(p["runs"], p.get("capped", False)),
                    duration(p.get("oldestWaitingAgeMs")),
                ]
                for p in priorities
            ),
        )
    tasks = queue.get("byTask") or []
    if tasks:
        lines += table(
            ["task", "runs"],
            (
                [f"{t['project']}/{t['task']}", count(t["runs"], t.get("capped", False))]
                for t in tasks
            ),
        )
    rest = queue.get("otherTasks") or {}
    if rest.get("tasks"):
        lines.append(f"  … {rest['tasks']} more tasks, {count(rest.get('runs'))} runs")
    return lines


def _session_lines(sessions: Mapping[str, Any]) -> list[str]:
    lines = [
        f"sessions  active {sessions.get('active', 0)} (expired {sessions.get('expired', 0)})"
        f"  slots used {sessions.get('slotsUsed', 0)}/{sessions.get('slots', 0)}"
    ]
    listed = sessions.get("list") or []
    if listed:
        lines += table(
            ["worker", "gen", "used/slots", "free", "heartbeat", "expires in", "capabilities"],
            (
                [
                    s.get("worker") or s["workerId"][:8],
                    str(s["generation"]),
                    f"{s['slotsUsed']}/{s['slots']}",
                    str(s["slotsFree"]),
                    duration(s.get("lastHeartbeatAgeMs")) + " ago",
                    duration(s.get("expiresInMs")),
                    capabilities_text(s.get("labels") or {}, s.get("runtimes") or {}),
                ]
                for s in listed
            ),
        )
    if sessions.get("truncated"):
        lines.append(f"  … only the {sessions.get('listLimit')} oldest heartbeats are listed")
    return lines


def _expiring_lines(expiring: Mapping[str, Any], now_ms: int) -> list[str]:
    """SPEC §16.3: credentials and certificates that expire within 14 days."""
    if not expiring:
        return []
    days = int(expiring.get("withinS") or 0) // 86400
    lines = [
        f"expiring  within {days}d: credentials {expiring.get('credentialsTotal', 0)}"
        f"  certificates {expiring.get('certificatesTotal', 0)}"
    ]
    rows = [
        [
            "credential",
            c["credentialId"],
            c.get("worker") or c["workerId"][:8],
            duration(int(c["expiresAtMs"]) - now_ms),
        ]
        for c in expiring.get("credentials") or []
    ]
    rows += [
        [
            "certificate",
            c["serial"],
            c.get("worker") or c["workerId"][:8],
            duration(int(c["notAfterMs"]) - now_ms),
        ]
        for c in expiring.get("certificates") or []
    ]
    if rows:
        lines += table(["kind", "id", "worker", "expires in"], rows)
    if expiring.get("truncated"):
        lines.append("  … more are not listed (admin worker list, docs/OPERATIONS.md)")
    return lines


def render(snapshot: Mapping[str, Any]) -> str:
    generated = snapshot.get("generatedAtMs")
    stamp = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime((generated or 0) / 1000))
    leases = snapshot.get("leases") or {}
    denials = snapshot.get("denials") or {}
    by_reason = ", ".join(
        f"{k} {v}"
        for k, v in sorted((denials.get("byReason") or {}).items(), key=lambda kv: (-kv[1], kv[0]))
    )
    lines = [f"QingLong status at {stamp}"]
    lines += _queue_lines(snapshot.get("queue") or {})
    lines += _session_lines(snapshot.get("sessions") or {})
    lines.append(
        f"leases    unstarted {leases.get('unstarted', 0)}  started {leases.get('started', 0)}"
        f"  expired-unstarted {leases.get('expiredUnstarted', 0)}"
        f"  expired-started {leases.get('expiredStarted', 0)}"
    )
    capped = "+" if denials.get("capped") else ""
    lines.append(
        f"denials   last hour {denials.get('total', 0)}{capped}"
        + (f"  ({by_reason})" if by_reason else "")
    )
    usage = float(snapshot.get("notificationQueueUsage") or 0.0)
    lines.append(
        f"notify    queue {usage:.1%} used"
        + ("  (a listener holds it: see docs/OPERATIONS.md)" if usage >= 0.1 else "")
    )
    lines += _expiring_lines(snapshot.get("expiring") or {}, int(generated or 0))
    return "\n".join(lines)
