"""The HTTP side of the worker listener: error envelopes for unparseable HTTP and
the request handler settings.

The TLS side (accept, ClientHello wait, handshake caps, per-identity caps) is
`tls_site.py`; this module is what runs once a TLS connection is established.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypedDict

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from qinglong.service.errors import error_response

log = logging.getLogger("qinglong.ingress.listener")


class EnvelopeRequestHandler(RequestHandler):
    """aiohttp answers unparseable HTTP (bad request line, oversized header) from
    the protocol, outside every middleware, with a text page; this answers with
    the `qinglong/error@v1` envelope instead."""

    __slots__ = ()

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if request.writer.output_size > 0:
            raise ConnectionError("response already started")
        log.info("malformed http request", extra={"event": "http.malformed", "status": status})
        reason = "malformed_http" if status < 500 else "internal_error"
        return error_response(status, reason, close_connection=True)


def envelope_handler_factory(server: web.Server) -> Callable[[], asyncio.Protocol]:
    """Like `server()` but building `EnvelopeRequestHandler`s with the same settings.
    (web.Server has no public hook for the handler class, hence `_kwargs`.)"""
    kwargs = dict(getattr(server, "_kwargs", {}))

    def factory() -> asyncio.Protocol:
        return EnvelopeRequestHandler(server, loop=asyncio.get_running_loop(), **kwargs)

    return factory


class RunnerSettings(TypedDict):
    """The AppRunner/RequestHandler keyword arguments `runner_kwargs` sets."""

    access_log: None
    keepalive_timeout: float
    shutdown_timeout: float
    max_line_size: int
    max_field_size: int
    max_headers: int
    lingering_time: float


def runner_kwargs(header_timeout_s: float, shutdown_timeout_s: float) -> RunnerSettings:
    """AppRunner/RequestHandler settings: the keep-alive timer also starts when a
    connection opens, so it is the deadline for a complete request head."""
    return {
        "access_log": None,
        "keepalive_timeout": header_timeout_s,
        "shutdown_timeout": shutdown_timeout_s,
        "max_line_size": 4096,
        "max_field_size": 4096,
        "max_headers": 32,
        # After an early 413 the unread body is drained for at most this long (so
        # the client can still read the answer), then the connection is closed.
        "lingering_time": 2.0,
    }
