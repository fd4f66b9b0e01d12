"""The audit stream: one JSON line per authentication decision, and one per
outcome of an action taken on it.

Order (SPEC §5: authenticate, authorize, record the decision, then act): a
request the ingress lets through to the database gets its `allowed` line
*before* the database call (which verifies the credential and acts in one round
trip), and a second line after it with what became of it: `done` (the action
ran; the reason is the database's answer status), `denied` (the database
refused the credential), `failed` (refused after authentication: a fence
conflict, an invalid projection; the reason is the category) or `undecided`
(no answer: the database unavailable, the request cancelled — the action may or
may not have committed). A crash between the two leaves the first. Each line is
flushed as it is written (`stream_emitter`).

Low-sensitivity by construction: the line is built from a fixed set of fields
(time, public credential id, worker id, action, outcome, reason) and nothing
else can be passed in — no secrets, digests, tokens, headers or bodies.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

Emit = Callable[[str], None]


class Outcome(StrEnum):
    ALLOWED = "allowed"
    DENIED = "denied"
    # The decision could not be completed (database unavailable, fence conflict
    # after authentication is not a denial).
    UNDECIDED = "undecided"
    # What became of an allowed action (the line after the database call).
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class AuditRecord:
    action: str
    outcome: Outcome
    reason: str
    credential_id: str | None
    worker_id: str | None

    def to_line(self, now_ms: int) -> str:
        return json.dumps(
            {
                "timeMs": now_ms,
                "stream": "audit",
                "credentialId": self.credential_id,
                "workerId": self.worker_id,
                "action": self.action,
                "outcome": self.outcome.value,
                "reason": self.reason,
            },
            separators=(",", ":"),
        )


@dataclass
class AuditLog:
    emit: Emit

    def record(self, record: AuditRecord) -> None:
        self.emit(record.to_line(int(time.time() * 1000)))


def stream_emitter(stream: object) -> Emit:
    """An emitter writing whole lines to a text stream and flushing each one."""

    def emit(line: str) -> None:
        stream.write(line + "\n")  # type: ignore[attr-defined]
        stream.flush()  # type: ignore[attr-defined]

    return emit
