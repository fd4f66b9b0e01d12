"""The wire paths of SPEC §5 (all POST)."""

from __future__ import annotations

from aiohttp import web

from qinglong.service import credential_rotation, views

SESSIONS = "/v1/sessions"
SESSIONS_HEARTBEAT = "/v1/sessions/heartbeat"
SESSIONS_CLOSE = "/v1/sessions/close"
OFFERS_PULL = "/v1/offers/pull"
OFFERS_PULL_BATCH = "/v1/offers/pull-batch"
LEASES_ACK = "/v1/leases/ack"
LEASES_HEARTBEAT = "/v1/leases/heartbeat"
LEASES_COMPLETE = "/v1/leases/complete"
LEASES_LOG = "/v1/leases/log"
LEASES_SECRETS = "/v1/leases/secrets"
LEASES_BATCH = "/v1/leases/batch"


def add_routes(app: web.Application) -> None:
    app.router.add_post(SESSIONS, views.open_session)
    app.router.add_post(SESSIONS_HEARTBEAT, views.heartbeat_session)
    app.router.add_post(SESSIONS_CLOSE, views.close_session)
    app.router.add_post(OFFERS_PULL, views.pull_offer)
    app.router.add_post(OFFERS_PULL_BATCH, views.pull_offer_batch)
    app.router.add_post(LEASES_ACK, views.ack_lease)
    app.router.add_post(LEASES_HEARTBEAT, views.heartbeat_lease)
    app.router.add_post(LEASES_COMPLETE, views.complete_lease)
    app.router.add_post(LEASES_LOG, views.lease_log)
    app.router.add_post(LEASES_SECRETS, views.lease_secrets)
    app.router.add_post(LEASES_BATCH, views.lease_batch)
    credential_rotation.add_route(app)
