"""aiohttp application factory for the worker-facing ingress."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from qinglong.service import cert_revocation
from qinglong.service.audit import AuditLog
from qinglong.service.config import IngressConfig
from qinglong.service.gateway import Gateway
from qinglong.service.heartbeat_batch import HeartbeatBatcher
from qinglong.service.idle_view import IdleView
from qinglong.service.metrics import IngressMetrics
from qinglong.service.middlewares import envelope_middleware
from qinglong.service.ratelimit import TokenBucketLimiter
from qinglong.service.routes import add_routes
from qinglong.service.secrets_crypto import KekSource
from qinglong.service.state import STATE, IngressState


def build_state(
    config: IngressConfig, audit: AuditLog, metrics: IngressMetrics | None = None
) -> IngressState:
    metrics = metrics or IngressMetrics()
    gateway = Gateway(config, metrics)
    idle_view = IdleView(config, gateway, metrics)
    return IngressState(
        config=config,
        gateway=gateway,
        metrics=metrics,
        audit=audit,
        limiter=TokenBucketLimiter(config.rate_per_s, config.rate_burst, config.rate_max_tracked),
        lease_limiter=TokenBucketLimiter(
            config.lease_rate_per_s, config.lease_rate_burst, config.rate_max_tracked
        ),
        idle_view=idle_view,
        heartbeats=HeartbeatBatcher(
            gateway,
            metrics,
            config.heartbeat_batch_window_ms,
            config.heartbeat_batch_max,
            batching=lambda: idle_view.engaged,
        ),
        # Read (and its 0600 mode checked) at start: a bad KEK file stops the start.
        kek=None if config.kek_file is None else KekSource(Path(config.kek_file)),
    )


async def _database_pool(app: web.Application) -> AsyncIterator[None]:
    state = app[STATE]
    await state.gateway.open()
    await state.idle_view.start()
    yield
    await state.heartbeats.close()
    await state.idle_view.close()
    await state.gateway.close()


def create_app(state: IngressState) -> web.Application:
    # client_max_size is aiohttp's own backstop; views.read_body enforces the
    # per-endpoint limit first (Content-Length check, then a bounded read).
    app = web.Application(
        client_max_size=state.config.max_complete_body_bytes,
        middlewares=[envelope_middleware, cert_revocation.revoked_certificate_middleware],
    )
    app[STATE] = state
    app.cleanup_ctx.append(_database_pool)
    # Revoked client certificates (SPEC §16.3): refused before any endpoint.
    cert_revocation.install(app)
    add_routes(app)
    return app
