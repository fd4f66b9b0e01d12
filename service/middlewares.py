"""Error envelope + request metrics for every response of the ingress.

aiohttp's own HTTP exceptions (404 unknown path, 405 wrong method, 413 over
`client_max_size`) and anything unexpected are rendered as
`qinglong/error@v1` JSON too, so a client never sees a framework text page.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web
from aiohttp.typedefs import Handler

from qinglong.service.errors import ApiError, error_response
from qinglong.service.state import STATE

log = logging.getLogger("qinglong.ingress")

_HTTP_REASONS: dict[int, str] = {
    400: "bad_request",
    404: "unknown_route",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "body_too_large",
    415: "unsupported_media_type",
}


def _route_name(request: web.Request) -> str:
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def _from_http_exception(exc: web.HTTPException) -> web.Response:
    reason = _HTTP_REASONS.get(exc.status, "http_error")
    response = error_response(exc.status, reason, close_connection=exc.status == 413)
    if exc.status == 405 and "Allow" in exc.headers:
        response.headers["Allow"] = exc.headers["Allow"]
    return response


@web.middleware
async def envelope_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.monotonic()
    try:
        response = await handler(request)
    except ApiError as exc:
        response = error_response(
            exc.status,
            exc.reason,
            exc.retry_after_s,
            exc.close_connection,
            exc.detail_key,
            exc.offset,
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = _from_http_exception(exc)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the envelope must cover every failure
        log.error(
            "unhandled error", extra={"event": "request.unhandled", "error": type(exc).__name__}
        )
        response = error_response(500, "internal_error", close_connection=True)
    state = request.app.get(STATE)
    if state is not None:
        route = _route_name(request)
        state.metrics.requests.inc(route, str(response.status))
        state.metrics.request_seconds.observe(time.monotonic() - started, route)
    return response
