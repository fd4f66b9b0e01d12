"""`GET /v1/runs/{id}/log?offset=N[&attempt=N][&follow=1]` of the producer API
(SPEC §13.4, §15.3).

Without `follow`: one `qinglong/run-log@v1` document, at most one page (1 MiB)
of the attempt's stored log from byte `offset` (default 0; `attempt` default
the run's latest); read on from its `nextOffset` while it is below
`storedBytes`.

With `follow=1`: 200 `application/x-ndjson`, one `qinglong/run-log@v1`
document per line. The first line is the page at `offset`; then the API reads
`ql.producer_run_log` from the last `nextOffset` every `log_follow_poll_s`
(≤ 1 s) and writes a line whenever there is new text or the attempt ended, and
an empty-text line at least every KEEPALIVE_S. The stream ends after the line
with `ended: true` whose `nextOffset` reached `storedBytes` (nothing more will
come), or, with `ended: false`, when it has lasted `log_follow_max_s` or the
API shuts down: the client reconnects from the last `nextOffset`. A failure
after the stream started is one last `qinglong/error@v1` line. Every read
checks the token again, so a revoked token ends the stream within a poll.

Abuse bounds: at most `log_followers_max` streams per process and
`log_followers_per_token` per token (429 `too_many_followers`, Retry-After);
the database is read at most once per poll interval per stream; a stream
lasts at most `log_follow_max_s`. The token needs the scope `log`; another
project's run is 404 like an unknown one.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from qinglong.db import api
from qinglong.db.answers import AnswerError
from qinglong.db.api import Call
from qinglong.log_text import LogPage
from qinglong.schemas.contract import SchemaId
from qinglong.service.errors import ERROR_SCHEMA, kind_for_status
from qinglong.service.gateway import DbRefused, DbUnavailable
from qinglong.service.producer_token import TokenProof
from qinglong.service.producer_views import (
    PRODUCER,
    ProducerError,
    _audit,
    act,
    authenticate,
    invalid,
)

RUN_LOG = "/v1/runs/{run_id}/log"
ACTION = "run.log"
NDJSON = "application/x-ndjson"
KEEPALIVE_S = 5.0
FOLLOWER_RETRY_AFTER_S = 5
_PARAMS = frozenset({"offset", "attempt", "follow"})
_OFFSET = re.compile(r"[0-9]{1,16}")
_ATTEMPT = re.compile(r"[1-9][0-9]{0,8}")
_FOLLOW = {"1": True, "true": True, "0": False, "false": False}

PageCall = Callable[[int, int | None], Call[LogPage]]


@dataclass
class Followers:
    """The follow streams open in this process, by token id (the caps of §15.3)."""

    limit: int
    per_token: int
    active: dict[str, int] = field(default_factory=dict)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    def enter(self, token_id: str) -> bool:
        if (
            sum(self.active.values()) >= self.limit
            or self.active.get(token_id, 0) >= self.per_token
        ):
            return False
        self.active[token_id] = self.active.get(token_id, 0) + 1
        return True

    def leave(self, token_id: str) -> None:
        left = self.active.get(token_id, 0) - 1
        if left > 0:
            self.active[token_id] = left
        else:
            self.active.pop(token_id, None)


FOLLOWERS: web.AppKey[Followers] = web.AppKey("qinglong_log_followers", Followers)


@dataclass(frozen=True)
class LogQuery:
    offset: int
    attempt: int | None
    follow: bool


def _query(request: web.Request, proof: TokenProof) -> LogQuery:
    query = request.query
    unknown = sorted(set(query) - _PARAMS)
    if unknown:
        raise invalid(ACTION, request, proof, unknown[0])
    for name in _PARAMS:
        if len(query.getall(name, [])) > 1:
            raise invalid(ACTION, request, proof, name)
    offset, attempt = query.get("offset", "0"), query.get("attempt")
    follow = _FOLLOW.get(query.get("follow", "0"))
    if not _OFFSET.fullmatch(offset):
        raise invalid(ACTION, request, proof, "offset")
    if attempt is not None and not _ATTEMPT.fullmatch(attempt):
        raise invalid(ACTION, request, proof, "attempt")
    if follow is None:
        raise invalid(ACTION, request, proof, "follow")
    return LogQuery(int(offset), None if attempt is None else int(attempt), follow)


async def _next_page(request: web.Request, call: Call[LogPage]) -> LogPage:
    """A follower's next page (its first went through `act`, audited)."""
    try:
        return await request.app[PRODUCER].gateway.call(call)
    except AnswerError:
        raise ProducerError(503, "database_error") from None


def _line(doc: dict[str, Any]) -> bytes:
    # ASCII only: a line reader that also splits on U+2028 or NEL (httpx) sees
    # one document per line whatever the log holds.
    return json.dumps(doc, separators=(",", ":")).encode("ascii") + b"\n"


def _log_line(page: LogPage) -> bytes:
    return _line({"schema": SchemaId.RUN_LOG.value, **page.as_json()})


def _error_line(status: int, reason: str) -> bytes:
    return _line({"schema": ERROR_SCHEMA, "error": kind_for_status(status).value, "reason": reason})


async def run_log(request: web.Request) -> web.StreamResponse:
    proof = authenticate(request, ACTION)
    query = _query(request, proof)
    run_id = request.match_info["run_id"]

    def call(offset: int, attempt: int | None) -> Call[LogPage]:
        return api.producer_run_log(
            token_id=proof.token_id,
            token_digest=proof.digest,
            run_id=run_id,
            attempt_no=attempt,
            offset=offset,
        )

    first = await act(request, ACTION, proof, call(query.offset, query.attempt))
    if not query.follow:
        return web.json_response({"schema": SchemaId.RUN_LOG.value, **first.as_json()})
    followers = request.app[FOLLOWERS]
    if not followers.enter(proof.token_id):
        _audit(request.app[PRODUCER], ACTION, proof.token_id, "refused", "too_many_followers", 429)
        raise ProducerError(429, "too_many_followers", retry_after_s=FOLLOWER_RETRY_AFTER_S)
    try:
        response = web.StreamResponse(
            headers={
                "Content-Type": NDJSON,
                "Cache-Control": "no-store",
                "X-Content-Type-Options": "nosniff",
            }
        )
        await response.prepare(request)
        try:
            await _stream(request, proof, response, first, call)
            await response.write_eof()
        except ConnectionError:  # the follower went away
            pass
        return response
    finally:
        followers.leave(proof.token_id)


def _status_of(exc: DbRefused | DbUnavailable | ProducerError) -> int:
    if isinstance(exc, DbRefused):
        return exc.http_status
    return exc.status if isinstance(exc, ProducerError) else 503


async def _stream(
    request: web.Request,
    proof: TokenProof,
    response: web.StreamResponse,
    page: LogPage,
    call: PageCall,
) -> None:
    """Lines until the log is finished, the stream's time is up or the API stops."""
    state, followers = request.app[PRODUCER], request.app[FOLLOWERS]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + state.config.log_follow_max_s
    await response.write(_log_line(page))
    sent_at, sent = loop.time(), True
    while not page.finished and loop.time() < deadline and not followers.stopping.is_set():
        if page.caught_up:
            try:
                await asyncio.wait_for(followers.stopping.wait(), state.config.log_follow_poll_s)
            except TimeoutError:
                pass
            if followers.stopping.is_set():
                break
        try:
            latest = await _next_page(request, call(page.next_offset, page.attempt_number))
        except (DbRefused, DbUnavailable, ProducerError) as exc:
            status = _status_of(exc)
            _audit(state, ACTION, proof.token_id, "refused", exc.reason, status)
            await response.write(_error_line(status, exc.reason))
            return
        sent = (
            bool(latest.text) or latest.ended != page.ended or loop.time() - sent_at >= KEEPALIVE_S
        )
        if sent:
            await response.write(_log_line(latest))
            sent_at = loop.time()
        page = latest
    if not sent:
        await response.write(_log_line(page))
    _audit(state, ACTION, proof.token_id, "done", "follow_ended", 200)


def add_route(app: web.Application) -> None:
    app.router.add_get(RUN_LOG, run_log, allow_head=False)


def install_followers(app: web.Application, limit: int, per_token: int) -> None:
    """The follow caps of one API process; the streams end when it shuts down."""
    followers = Followers(limit, per_token)
    app[FOLLOWERS] = followers

    async def stop_following(app: web.Application) -> None:
        followers.stopping.set()

    app.on_shutdown.append(stop_following)
