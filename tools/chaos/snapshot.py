"""Snapshots the checker reads: the database (as superuser) and worker journals.

Database snapshot (`snapshot.json`): every lease, every `run.dispatched` event,
every run (with its pool) and attempt, every session (with its declared labels),
every worker's grants (pools, labels), with times as integer microseconds since
the epoch (the overlap check needs the database's own resolution) and `takenAtUs` from
`clock_timestamp()`. Each lease carries `offerDigest`: the digest of its offer
projection (`ql_private.offer_projection`, what a replay would return now) in
the *stable view* of :func:`offer_view_digest`, so the checker can compare it
with the offer a worker stored, without keeping every projection.

Journal view: read-only, never takes the owner lock; parses what a restarted
worker would parse and records every permission or layout problem instead of
raising. The lease token itself is reduced to its SHA-256 at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SNAPSHOT_FILE = "snapshot.json"
# Lease fields a newer version of one lease may change (worker/journal.py agrees).
MUTABLE_LEASE_FIELDS = frozenset({"leaseVersion", "expiresAtMs", "updatedAtMs", "state",
                                  "startedAtMs", "leaseToken", "cancelRequested"})  # fmt: skip
TEMP_PREFIX = ".tmp-"  # worker/fsio.py
ENTRY_SCHEMA = "qinglong/inbox-entry@v1"

__all__ = ["JournalView", "offer_view_digest", "read_journal", "take_db_snapshot",
           "token_digest"]  # fmt: skip


def offer_view_digest(offer: dict[str, Any]) -> str:
    """SHA-256 of an offer without envelope fields and without mutable lease fields.

    Two deliveries of one offer (the first answer and any replay) must agree on it.
    """
    view = {k: v for k, v in offer.items() if k not in ("schema", "status")}
    lease = view.get("lease")
    if isinstance(lease, dict):
        view["lease"] = {k: v for k, v in lease.items() if k not in MUTABLE_LEASE_FIELDS}
    data = json.dumps(view, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


# ------------------------------------------------------------------ database

_US = "(extract(epoch FROM {})*1000000)::bigint"


def _us(column: str) -> str:
    return _US.format(column)


_LEASES = f"""
SELECT l.id, l.offer_id::text, l.attempt_id::text, l.run_id::text, l.worker_id::text,
       l.execution_revision_id::text,
       l.session_id::text, l.session_generation, l.lease_generation, l.lease_version,
       encode(l.token_digest, 'hex'), l.content_digest, {_us("l.claimed_at")},
       {_us("l.expires_at")}, {_us("l.started_at")}, {_us("l.released_at")}, l.release_reason,
       ql_private.offer_projection(l.id)
  FROM ql_private.run_leases l ORDER BY l.id"""
_LEASE_KEYS = ("id", "offerId", "attemptId", "runId", "workerId", "revisionId", "sessionId",
               "sessionGeneration", "leaseGeneration", "leaseVersion", "tokenDigest",
               "contentDigest", "claimedAtUs", "expiresAtUs", "startedAtUs", "releasedAtUs",
               "releaseReason")  # fmt: skip
_DISPATCHED = f"""
SELECT e.id, e.run_id::text, e.attempt_id::text, e.payload->>'offerId',
       e.payload->>'workerId', {_us("e.created_at")}
  FROM ql_private.events e WHERE e.type = 'run.dispatched' ORDER BY e.id"""
_RUNS = """
SELECT r.id::text, r.state, r.current_attempt_id::text, r.cancel_requested, r.runtime_owned,
       r.task_id::text, pj.name || '/' || po.name
  FROM ql_private.runs r
  JOIN ql_private.pools po ON po.id = r.pool_id
  JOIN ql_private.projects pj ON pj.id = po.project_id
 ORDER BY r.queue_seq"""
_SESSIONS = f"""
SELECT s.session_id::text, s.worker_id::text, s.generation, s.state, {_us("s.opened_at")},
       {_us("s.expires_at")}, {_us("s.closed_at")}, s.slots, s.capabilities -> 'labels'
  FROM ql_private.worker_sessions s ORDER BY s.opened_at"""
_SESSION_KEYS = ("sessionId", "workerId", "generation", "state", "openedAtUs", "expiresAtUs",
                 "closedAtUs", "slots", "labels")  # fmt: skip
# What each worker is granted (SPEC §13): pools ('P/N'; allPools = '*') and labels.
_GRANTS = """
SELECT w.id::text, w.all_pools, w.self_labels,
       COALESCE((SELECT array_agg(pj.name || '/' || po.name ORDER BY 1)
                   FROM ql_private.worker_pool_grants g
                   JOIN ql_private.pools po ON po.id = g.pool_id
                   JOIN ql_private.projects pj ON pj.id = po.project_id
                  WHERE g.worker_id = w.id), '{}'),
       COALESCE((SELECT jsonb_object_agg(l.key, l.value) FROM ql_private.worker_labels l
                  WHERE l.worker_id = w.id), '{}')
  FROM ql_private.workers w ORDER BY w.id"""
_GRANT_KEYS = ("workerId", "allPools", "selfLabels", "pools", "labels")
_REVISIONS = """
SELECT r.id::text, r.content_digest, encode(r.canonical, 'hex'), r.kind, r.executor, r.spec,
       r.placement
  FROM ql_private.execution_revisions r ORDER BY r.created_at"""
_REVISION_KEYS = ("id", "contentDigest", "canonicalHex", "kind", "executor", "spec",
                  "placement")  # fmt: skip
# Events that end a run (the only legitimate way into a terminal state).
TERMINAL_EVENTS = ("run.succeeded", "run.failed", "run.cancelled")
# Events that end an attempt or start the next one (checker: tools/chaos/execution.py).
ATTEMPT_EVENTS = ("attempt.failed", "attempt.lost", "run.retry_scheduled", "run.cancel_requested")
_RUN_EVENTS = f"""
SELECT e.run_id::text, e.type, {_us("e.created_at")}, e.attempt_id::text
  FROM ql_private.events e WHERE e.type = ANY(%s) ORDER BY e.id"""
_ATTEMPTS = f"""
SELECT a.id::text, a.run_id::text, a.attempt_no, a.state, a.executor, {_us("a.not_before")},
       {_us("a.created_at")}, {_us("a.finished_at")}, a.exit_code, a.reason,
       (a.result->>'durationMs')::bigint
  FROM ql_private.attempts a ORDER BY a.run_id, a.attempt_no"""


def _rows(conn: Any, sql: str, keys: tuple[str, ...]) -> list[dict[str, Any]]:
    return [dict(zip(keys, row, strict=True)) for row in conn.execute(sql)]


def _leases(conn: Any) -> list[dict[str, Any]]:
    leases: list[dict[str, Any]] = []
    for row in conn.execute(_LEASES):
        lease = dict(zip(_LEASE_KEYS, row[:-1], strict=True))
        lease["offerDigest"] = offer_view_digest(row[-1]) if row[-1] is not None else None
        leases.append(lease)
    return leases


def take_db_snapshot(dsn: str) -> dict[str, Any]:
    """One REPEATABLE READ transaction: a consistent cut of everything checked."""
    import psycopg

    with psycopg.connect(dsn, connect_timeout=10) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        row = conn.execute(f"SELECT {_us('clock_timestamp()')}").fetchone()
        assert row is not None
        counts = dict(
            conn.execute("SELECT type, count(*) FROM ql_private.events GROUP BY type").fetchall()
        )
        return {
            "takenAtUs": int(row[0]),
            "leases": _leases(conn),
            "dispatched": _rows(
                conn,
                _DISPATCHED,
                ("id", "runId", "attemptId", "offerId", "workerId", "createdAtUs"),
            ),
            "runs": _rows(
                conn,
                _RUNS,
                (
                    "id",
                    "state",
                    "currentAttemptId",
                    "cancelRequested",
                    "runtimeOwned",
                    "taskId",
                    "pool",
                ),
            ),
            "grants": _rows(conn, _GRANTS, _GRANT_KEYS),
            "attempts": _rows(
                conn,
                _ATTEMPTS,
                (
                    "id",
                    "runId",
                    "attemptNo",
                    "state",
                    "executor",
                    "notBeforeUs",
                    "createdAtUs",
                    "finishedAtUs",
                    "exitCode",
                    "reason",
                    "durationMs",
                ),
            ),
            "sessions": _rows(conn, _SESSIONS, _SESSION_KEYS),
            "revisions": _rows(conn, _REVISIONS, _REVISION_KEYS),
            "runEvents": [
                {"runId": r, "type": t, "createdAtUs": int(at), "attemptId": a}
                for r, t, at, a in conn.execute(
                    _RUN_EVENTS, (list(TERMINAL_EVENTS + ATTEMPT_EVENTS),)
                )
            ],
            "eventCounts": {str(k): int(v) for k, v in counts.items()},
        }


def write_json(path: Path, doc: Any) -> None:
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
    os.replace(tmp, path)


# ------------------------------------------------------------------ journals


@dataclass
class JournalView:
    """What a journal root holds, as the checker needs it."""

    root: Path
    problems: list[str] = field(default_factory=list)
    inbox: dict[str, dict[str, Any]] = field(default_factory=dict)  # offerId -> summary
    pending: dict[str, Any] | None = None  # offerId, workerId, sessionId, generation, ...
    failed: dict[str, str] = field(default_factory=dict)  # offerId -> reason
    failed_attempts: dict[str, int] = field(default_factory=dict)  # offerId -> attempts
    # Entries the worker moved aside (worker/journal.py ASIDE_DIR): leases it gave up
    # on the record (another session, superseded, a fence probe answered dead).
    aside: set[str] = field(default_factory=set)

    def ids(self) -> dict[str, Any]:
        """The light form kept for the heal-time cut."""
        return {"inbox": sorted(self.inbox),
                "pending": self.pending["offerId"] if self.pending else None}  # fmt: skip


JOURNAL_DIRS = ("inbox", "failed-claims", "aside")


def _mode_problem(path: Path, st: os.stat_result, want_dir: bool) -> str | None:
    mode = stat.S_IMODE(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return f"{path.name}: symlink"
    if want_dir != stat.S_ISDIR(st.st_mode):
        return f"{path.name}: wrong file type"
    want = 0o700 if want_dir else 0o600
    if mode != want:
        return f"{path.name}: mode {mode:04o}, want {want:04o}"
    if st.st_uid != os.geteuid():
        return f"{path.name}: owned by uid {st.st_uid}"
    return None


def _load(path: Path, problems: list[str]) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        problems.append(f"{path.name}: unreadable ({type(exc).__name__})")
        return None
    if not isinstance(doc, dict):
        problems.append(f"{path.name}: not a JSON object")
        return None
    return doc


def _entry_summary(doc: dict[str, Any]) -> dict[str, Any]:
    offer, lease = doc.get("offer") or {}, doc.get("lease") or {}
    token = lease.get("leaseToken")
    return {
        "offerDigest": offer_view_digest(offer),
        "tokenDigest": token_digest(token) if isinstance(token, str) else None,
        "leaseVersion": lease.get("leaseVersion"),
        "runId": lease.get("runId"),
        "attemptId": lease.get("attemptId"),
        "workerId": lease.get("workerId"),
        "sessionId": lease.get("sessionId"),
        "generation": lease.get("sessionGeneration"),
        "leaseGeneration": lease.get("leaseGeneration"),
        "contentDigest": offer.get("contentDigest"),
        "acceptedAtMs": doc.get("acceptedAtMs"),
        # The worker's own record of the first response, field by field, for the
        # checker to compare with the lease row and the revision independently of
        # the database's offer projection.
        "offer": {
            "offerId": offer.get("offerId"),
            "target": offer.get("target"),
            "candidate": offer.get("candidate"),
            "executionRevision": offer.get("executionRevision"),
            "claimedAtMs": lease.get("claimedAtMs"),
        },
    }


def _scan(directory: Path, view: JournalView) -> list[Path]:
    """Check every entry of one directory; return its regular files."""
    files: list[Path] = []
    for path in sorted(directory.iterdir()):
        st = path.lstat()
        if path.name.startswith(TEMP_PREFIX):
            view.problems.append(f"{directory.name}/{path.name}: leftover temp file")
        if path.parent == view.root and path.name in JOURNAL_DIRS:
            continue
        problem = _mode_problem(path, st, want_dir=False)
        if problem:
            view.problems.append(f"{directory.name}/{problem}")
        elif not path.name.startswith(TEMP_PREFIX):
            files.append(path)
    return files


def _read_inbox(view: JournalView) -> None:
    for path in _scan(view.root / "inbox", view):
        doc = _load(path, view.problems)
        if doc is None:
            continue
        offer_id = path.name.removesuffix(".json")
        if doc.get("schema") != ENTRY_SCHEMA or doc.get("offerId") != offer_id:
            view.problems.append(f"inbox/{path.name}: not an inbox entry for its name")
            continue
        view.inbox[offer_id] = _entry_summary(doc)


def _read_failed(view: JournalView) -> None:
    for path in _scan(view.root / "failed-claims", view):
        doc = _load(path, view.problems)
        if doc is not None:
            offer_id = path.name.removesuffix(".json")
            view.failed[offer_id] = str(doc.get("reason"))
            attempts = (doc.get("claim") or {}).get("attempts")
            if isinstance(attempts, int):
                view.failed_attempts[offer_id] = attempts


def _read_pending(view: JournalView, path: Path) -> None:
    doc = _load(path, view.problems)
    if doc is None:
        return
    token = doc.get("leaseToken")
    view.pending = {
        "offerId": doc.get("offerId"),
        "workerId": doc.get("workerId"),
        "sessionId": doc.get("sessionId"),
        "generation": doc.get("generation"),
        "tokenDigest": token_digest(token) if isinstance(token, str) else None,
        "attempts": doc.get("attempts"),
    }


def read_journal(root: Path) -> JournalView:
    view = JournalView(root)
    try:
        st = root.lstat()
    except FileNotFoundError:
        view.problems.append("journal root missing")
        return view
    problem = _mode_problem(root, st, want_dir=True)
    if problem:
        view.problems.append(f"root {problem}")
    for name in JOURNAL_DIRS:
        sub = root / name
        if not sub.exists():
            continue
        problem = _mode_problem(sub, sub.lstat(), want_dir=True)
        if problem:
            view.problems.append(problem)
    top = {p.name for p in _scan(root, view)}
    if "pending-claim.json" in top:
        _read_pending(view, root / "pending-claim.json")
    if (root / "inbox").is_dir():
        _read_inbox(view)
    if (root / "failed-claims").is_dir():
        _read_failed(view)
    if (root / "aside").is_dir():
        view.aside = {p.name.removesuffix(".json") for p in _scan(root / "aside", view)
                      if p.name.endswith(".json")}  # fmt: skip
    return view
