"""Plain-HTTP admin listener (loopback by default): /healthz, /readyz, /metrics."""

from __future__ import annotations

import json

from aiohttp import web

from qinglong.service.state import IngressState

ADMIN_STATE: web.AppKey[IngressState] = web.AppKey("qinglong_admin_state", IngressState)


def _json(status: int, doc: dict[str, object]) -> web.Response:
    return web.Response(
        status=status, body=json.dumps(doc).encode(), content_type="application/json"
    )


async def healthz(request: web.Request) -> web.Response:
    return _json(200, {"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    state = request.app[ADMIN_STATE]
    ready = await state.gateway.ready(state.config.ready_timeout_ms / 1000)
    if ready:
        return _json(200, {"status": "ready"})
    return _json(503, {"status": "unavailable", "reason": "database_unavailable"})


async def metrics(request: web.Request) -> web.Response:
    state = request.app[ADMIN_STATE]
    return web.Response(
        body=state.metrics.render().encode(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


def create_admin_app(state: IngressState) -> web.Application:
    app = web.Application()
    app[ADMIN_STATE] = state
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app
