"""The soak's JSON-lines history: one operation per line, Jepsen style.

Every line is an :class:`Op` — ``{"index", "ts", "process", "type", "f", ...}``:

* ``type`` is ``invoke`` (an intent was first seen), ``ok`` / ``fail`` (its
  outcome became known to the process) or ``info`` (anything else: a retry, a
  resume, a fault injected by the nemesis).
* ``f`` says what kind of operation: ``claim`` (a worker's pull intent, keyed by
  ``offerId``), ``enqueue`` / ``cancel`` (the orchestrator acting as a client),
  or a fault kind for ``process == "nemesis"``.

Claim operations are *derived*, not instrumented: the worker already writes one
JSON event line per claim outcome (worker/eventlog.py), and the orchestrator's
journal observer adds what the log cannot show (a pending intent seen on disk,
an intent moved aside under ``failed-claims/``). An intent whose first pull
answered ``idle`` while the worker was already idle leaves no trace at all; it
never wrote anything on the server either (an idle pull writes nothing), so no
check needs it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

HISTORY_FILE = "history.jsonl"

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
NEMESIS = "nemesis"
CLIENT = "client"
# Nemesis ops that are faults (the others record restarts, the heal, ...).
FAULT_KINDS = (
    "kill_ingress",
    "kill_worker",
    "pg_restart",
    "drop_response",
    "latency_spike",
    "crash_point",
    "double_start",
)

# Worker event -> (op type, value). Every one of these carries `offerId`.
_CLAIM_EVENTS: dict[str, tuple[str, str]] = {
    "claim.accepted": (OK, "accepted"),
    "claim.idle": (OK, "idle"),
    "claim.retry": (INFO, "retry"),
    "claim.conflict": (FAIL, "conflict"),
    "claim.rejected": (FAIL, "rejected"),
    "claim.exhausted": (FAIL, "exhausted"),
    "claim.abandoned": (FAIL, "abandoned"),
    "session.resumed": (INFO, "resumed"),
}

# Executor events (worker/lifecycle.py) -> op value, f "exec": what a worker did
# with an accepted offer (started its command, completed or abandoned its lease).
_EXEC_EVENTS: dict[str, str] = {
    "exec.started": "started",
    "exec.exited": "exited",
    "exec.completed": "completed",
    "exec.abandoned": "abandoned",
    "exec.recovered": "recovered",
    "exec.start_failed": "start_failed",
    "exec.cancel_requested": "cancel_seen",
}
_EXEC_FIELDS = ("attemptId", "outcome", "exitCode", "returncode", "stoppedBy", "phase", "state")

__all__ = ["FAULT_KINDS", "HISTORY_FILE", "HistoryWriter", "Op", "build_history", "read_history",
           "worker_log_ops"]  # fmt: skip


@dataclass(frozen=True)
class Op:
    ts: int  # wall clock, ms
    process: str
    type: str
    f: str
    offer_id: str | None = None
    run_id: str | None = None
    value: str | None = None
    reason: str | None = None
    src: str = "log"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    index: int = -1

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"index": self.index, "ts": self.ts, "process": self.process,
                               "type": self.type, "f": self.f}  # fmt: skip
        for key, value in (("offerId", self.offer_id), ("runId", self.run_id),
                           ("value", self.value), ("reason", self.reason)):  # fmt: skip
            if value is not None:
                doc[key] = value
        doc["src"] = self.src
        doc.update(self.extra)
        return doc

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Op:
        known = {"index", "ts", "process", "type", "f", "offerId", "runId", "value", "reason",
                 "src"}  # fmt: skip
        return cls(
            ts=int(doc["ts"]),
            process=str(doc["process"]),
            type=str(doc["type"]),
            f=str(doc["f"]),
            offer_id=doc.get("offerId"),
            run_id=doc.get("runId"),
            value=doc.get("value"),
            reason=doc.get("reason"),
            src=str(doc.get("src", "log")),
            extra={k: v for k, v in doc.items() if k not in known},
            index=int(doc.get("index", -1)),
        )


class HistoryWriter:
    """Appends ops to a JSON-lines file; safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._handle: TextIO = open(path, "a", encoding="utf-8")  # closed by close()

    def write(self, op: Op) -> None:
        line = json.dumps(op.to_doc(), separators=(",", ":"), sort_keys=True)
        with self._lock:
            self._handle.write(line + "\n")
            self._handle.flush()

    def close(self) -> None:
        with self._lock:
            self._handle.close()


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.startswith("{"):
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                continue  # a line torn by SIGKILL mid-write
            if isinstance(doc, dict):
                yield doc


def _reason(doc: dict[str, Any]) -> str | None:
    reason = doc.get("reason")
    return str(reason) if reason is not None else None


def worker_log_ops(process: str, path: Path) -> list[Op]:
    """Map one worker's JSON log (all of its restarts, appended) onto ops."""
    ops: list[Op] = []
    for doc in _json_lines(path):
        event, ts = doc.get("event"), int(doc.get("ts", 0))
        if event in _CLAIM_EVENTS and isinstance(doc.get("offerId"), str):
            kind, value = _CLAIM_EVENTS[event]
            ops.append(
                Op(
                    ts,
                    process,
                    kind,
                    "claim",
                    offer_id=doc["offerId"],
                    run_id=doc.get("runId"),
                    value=value,
                    reason=_reason(doc),
                    extra={"attemptId": doc["attemptId"]} if doc.get("attemptId") else {},
                )
            )
        elif event == "worker.stopped" and isinstance(doc.get("pendingOfferId"), str):
            ops.append(Op(ts, process, INFO, "claim", offer_id=doc["pendingOfferId"],
                          value="pending_at_stop"))  # fmt: skip
        elif event in _EXEC_EVENTS and isinstance(doc.get("offerId"), str):
            ops.append(
                Op(
                    ts,
                    process,
                    INFO,
                    "exec",
                    offer_id=doc["offerId"],
                    run_id=doc.get("runId"),
                    value=_EXEC_EVENTS[event],
                    reason=_reason(doc) or doc.get("category"),
                    extra={k: doc[k] for k in _EXEC_FIELDS if doc.get(k) is not None},
                )
            )
        elif event == "worker.starting":
            ops.append(Op(ts, process, INFO, "start", value=str(doc.get("pid"))))
    return ops


def read_ops(path: Path) -> list[Op]:
    return [Op.from_doc(doc) for doc in _json_lines(path)] if path.exists() else []


def normalize(ops: Iterable[Op]) -> list[Op]:
    """Sort by time; make the first op of every claim its `invoke`; number them.

    A claim is first seen either in the log (its first retry/outcome) or by the
    journal observer (pending intent on disk); whichever came first becomes the
    invoke, later duplicate invokes are dropped.
    """
    ordered = sorted(ops, key=lambda op: op.ts)  # stable: log order within a ms
    seen: set[tuple[str, str]] = set()
    out: list[Op] = []
    for op in ordered:
        if op.f == "claim" and op.offer_id is not None:
            key = (op.process, op.offer_id)
            if key not in seen:
                seen.add(key)
                if op.type != INVOKE:
                    out.append(Op(op.ts, op.process, INVOKE, "claim", offer_id=op.offer_id,
                                  src=op.src))  # fmt: skip
            elif op.type == INVOKE:
                continue
        out.append(op)
    return [_with_index(op, i) for i, op in enumerate(out)]


def _with_index(op: Op, index: int) -> Op:
    return Op(op.ts, op.process, op.type, op.f, op.offer_id, op.run_id, op.value, op.reason,
              op.src, op.extra, index)  # fmt: skip


def build_history(out_dir: Path, worker_logs: dict[str, Path], recorded: Iterable[Path]) -> int:
    """Merge worker logs and the orchestrator's own records into history.jsonl."""
    ops: list[Op] = []
    for process, log_path in sorted(worker_logs.items()):
        if log_path.exists():
            ops.extend(worker_log_ops(process, log_path))
    for path in recorded:
        ops.extend(read_ops(path))
    final = normalize(ops)
    with open(out_dir / HISTORY_FILE, "w", encoding="utf-8") as handle:
        for op in final:
            handle.write(json.dumps(op.to_doc(), separators=(",", ":"), sort_keys=True) + "\n")
    return len(final)


def read_history(history_dir: Path) -> list[Op]:
    return read_ops(history_dir / HISTORY_FILE)
