"""The wire paths of SPEC §5 (all POST)."""

from __future__ import annotations

from aiohttp import web

from service import views

SESSIONS = "/v1/sessions"
SESSIONS_HEARTBEAT = "/v1/sessions/heartbeat"
SESSIONS_CLOSE = "/v1/sessions/close"
OFFERS_PULL = "/v1/offers/pull"
LEASES_ACK = "/v1/leases/ack"
LEASES_HEARTBEAT = "/v1/leases/heartbeat"
LEASES_COMPLETE = "/v1/leases/complete"


def add_routes(app: web.Application) -> None:
    app.router.add_post(SESSIONS, views.open_session)
    app.router.add_post(SESSIONS_HEARTBEAT, views.heartbeat_session)
    app.router.add_post(SESSIONS_CLOSE, views.close_session)
    app.router.add_post(OFFERS_PULL, views.pull_offer)
    # Lease lifecycle (SPEC §7) is not served yet: routed so clients get a clear 501.
    for path in (LEASES_ACK, LEASES_HEARTBEAT, LEASES_COMPLETE):
        app.router.add_post(path, views.not_implemented)
