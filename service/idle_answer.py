"""The body of an `idle` pull answer, and the replica's idle view's copies of it.

An answer from the idle view (service/idle_view.py) is the database's envelope
for an empty queue (`IDLE_RESULT`) with the replica's retry guidance: its bytes
depend on `retryAfterMs` alone, which takes at most `idle_jitter_ms + 1`
values. Building the document, checking it against the contract and encoding
it was a tenth of the CPU of an idle pull (docs/BENCHMARKS.md, "Idle fleets");
`IdleAnswers` does that once per value and keeps the bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from qinglong.schemas import fastpath
from qinglong.schemas.contract import SchemaId

OFFER_SCHEMA = SchemaId.REMOTE_EXECUTION_OFFER


def idle_body(result: dict[str, Any], retry_after_ms: int) -> dict[str, Any]:
    """The `qinglong/remote-execution-offer@v1` idle document for a database
    `idle` envelope."""
    return {
        "schema": OFFER_SCHEMA.value,
        "status": "idle",
        "reason": result.get("reason"),
        "stats": result.get("stats"),
        "truncated": result.get("truncated"),
        "retryAfterMs": retry_after_ms,
    }


def encode(doc: dict[str, Any]) -> bytes:
    """A response document's bytes as the ingress sends them."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclass
class IdleAnswers:
    """Checked, encoded bodies of one envelope's idle answer, by `retryAfterMs`.

    A body is checked against the contract before it is kept (a `ContractError`
    propagates, as `views.respond` turns it into 503 `invalid_projection`).
    At most `max_entries` are kept; beyond that each is built afresh.
    """

    result: dict[str, Any]
    max_entries: int = 4096
    _bodies: dict[int, bytes] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._bodies)

    def body(self, retry_after_ms: int) -> bytes:
        found = self._bodies.get(retry_after_ms)
        if found is not None:
            return found
        doc = idle_body(self.result, retry_after_ms)
        fastpath.validate(OFFER_SCHEMA.value, doc)
        encoded = encode(doc)
        if len(self._bodies) < self.max_entries:
            self._bodies[retry_after_ms] = encoded
        return encoded
