"""Session heartbeats, batched into one database call per short window.

10,000 workers heartbeating every 20 s are 500 calls/s on their own. While the
idle view is engaged (a busy replica), heartbeats that arrive within
`heartbeat_batch_window_ms` (or until `heartbeat_batch_max` are waiting) go to
the database together as one `ql.heartbeat_sessions(items)` call. The database
runs `ql.heartbeat_session` for each item in its own subtransaction and answers
per item exactly what the single call answers (or the SQLSTATE it raised), so
every worker gets the same HTTP answer as before and one bad item never affects
another. A batch of one — and every heartbeat while the view is dormant or
batching is off — is the plain `ql.heartbeat_session` call.

The items carry the SHA-256 of each credential secret (as the single call does,
as hex inside the jsonb argument); nothing here is logged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from qinglong.db import api
from qinglong.db.answers import AnswerError, HeartbeatItemAnswer, ItemFailed, SessionAnswer
from qinglong.db.api import Call
from qinglong.db.errors import from_sqlstate
from qinglong.service.gateway import DbRefused, DbUnavailable, Gateway, refusal
from qinglong.service.metrics import IngressMetrics


@dataclass(frozen=True)
class HeartbeatItem:
    credential_id: str
    secret_digest: bytes = field(repr=False)
    worker_id: str
    session_id: str
    generation: int

    def call(self) -> Call[SessionAnswer]:
        return api.heartbeat_session(
            credential_id=self.credential_id,
            secret_digest=self.secret_digest,
            worker_id=self.worker_id,
            session_id=self.session_id,
            generation=self.generation,
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "credentialId": self.credential_id,
            "secretDigest": self.secret_digest.hex(),
            "workerId": self.worker_id,
            "sessionId": self.session_id,
            "generation": self.generation,
        }


def item_error(sqlstate: str | None) -> Exception:
    """What the single call would have raised for this SQLSTATE."""
    refused = refusal(from_sqlstate(sqlstate))
    return refused if refused is not None else DbUnavailable("database_error")


@dataclass
class HeartbeatBatcher:
    gateway: Gateway
    metrics: IngressMetrics
    window_ms: int
    max_items: int
    # Batch only while this says so (the idle view is engaged): a quiet replica
    # keeps one immediate call per heartbeat.
    batching: Callable[[], bool] = lambda: True
    _pending: list[tuple[HeartbeatItem, asyncio.Future[SessionAnswer]]] = field(
        default_factory=list
    )
    _timer: asyncio.TimerHandle | None = None
    _flushes: set[asyncio.Task[None]] = field(default_factory=set)

    async def heartbeat(self, item: HeartbeatItem) -> SessionAnswer:
        """The `ql.heartbeat_session` result for this item (or its exception)."""
        if self.window_ms <= 0 or self.max_items <= 1 or not self.batching():
            return await self.gateway.call(item.call())
        future: asyncio.Future[SessionAnswer] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self.max_items:
            self._flush_now()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(
                self.window_ms / 1000, self._flush_now
            )
        return await future

    def _flush_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._pending:
            batch, self._pending = (
                self._pending[: self.max_items],
                self._pending[self.max_items :],
            )
            task = asyncio.create_task(self._send(batch))
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)

    async def _send(self, batch: list[tuple[HeartbeatItem, asyncio.Future[SessionAnswer]]]) -> None:
        self.metrics.heartbeat_batches.inc()
        self.metrics.heartbeat_batch_items.inc(amount=len(batch))
        try:
            if len(batch) == 1:
                one: HeartbeatItemAnswer = await self.gateway.call(batch[0][0].call())
                results = [one]
            else:
                results = await self.gateway.call(
                    api.heartbeat_sessions(items=[item.as_json() for item, _ in batch])
                )
                if len(results) != len(batch):
                    raise DbUnavailable("invalid_projection")
        except (DbUnavailable, DbRefused, AnswerError) as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(_copy(exc))
            return
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, ItemFailed):
                future.set_exception(item_error(result.sqlstate))
            else:
                future.set_result(result)

    async def close(self) -> None:
        self._flush_now()
        if self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)


def _copy(exc: DbUnavailable | DbRefused | AnswerError) -> Exception:
    if isinstance(exc, AnswerError):
        return AnswerError(exc.function, exc.detail)
    if isinstance(exc, DbRefused):
        return DbRefused(exc.sqlstate, exc.reason, exc.http_status)
    return DbUnavailable(exc.reason)
