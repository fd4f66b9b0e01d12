"""`POST /v1/credentials/rotate` (SPEC §16.2): a worker replaces its own credential.

The same pipeline as every worker call (views._admit: limits, strict JSON,
schema, the certificate's worker = the body's, a well-formed credential; then
views._act: audit, one database call, audit). The new id and secret are
generated here (`pki.generate_credential`, Python `secrets`); only the secret's
SHA-256 goes to the database (`ql.rotate_credential`), which authenticates the
presented credential, stores the successor with the same lifetime and lets the
presented one expire at the successor's first use or within 24 h.

The answer is the only one of the ingress that carries a secret: the new
credential, generated for it. It is sent with `Cache-Control: no-store`, never
logged or audited (the audit lines name the presented credential id only), and
lost with the answer if the connection drops — the worker then rotates again
with its current credential, which revokes the successor it never received.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from qinglong.db import api
from qinglong.db.answers import RotateAnswer, Rotated
from qinglong.schemas.contract import SchemaId
from qinglong.service import pki
from qinglong.service.state import IngressState
from qinglong.service.views import (
    Endpoint,
    _act,
    _admit,
    _in_schema_order,
    _invalid_projection,
    respond,
)

PATH = "/v1/credentials/rotate"
CREDENTIAL_ROTATE = Endpoint(
    "credentials.rotate",
    "credential.rotate",
    SchemaId.CREDENTIAL_ROTATE_REQUEST,
    SchemaId.CREDENTIAL,
    200,
)


def _body(state: IngressState, result: RotateAnswer, token: str) -> dict[str, Any]:
    if not isinstance(result, Rotated):
        raise _invalid_projection(state, CREDENTIAL_ROTATE, f"unexpected status {result.status!r}")
    doc = {"schema": SchemaId.CREDENTIAL.value, **result.credential, "credential": token}
    return _in_schema_order(SchemaId.CREDENTIAL, doc)


async def rotate_credential(request: web.Request) -> web.Response:
    state, admitted = await _admit(request, CREDENTIAL_ROTATE)
    cred = admitted.credential
    new = pki.generate_credential()
    result = await _act(
        state,
        CREDENTIAL_ROTATE,
        admitted,
        api.rotate_credential(
            credential_id=cred.credential_id,
            secret_digest=cred.secret_digest,
            worker_id=admitted.worker_id,
            new_credential_id=new.credential_id,
            new_secret_digest=new.secret_digest,
        ),
    )
    body = _body(state, result, new.token)
    if body.get("credentialId") != new.credential_id:
        raise _invalid_projection(state, CREDENTIAL_ROTATE, "$.credentialId: not the new one")
    response = respond(request, state, CREDENTIAL_ROTATE, body)
    response.headers["Cache-Control"] = "no-store"
    return response


def add_route(app: web.Application) -> None:
    app.router.add_post(PATH, rotate_credential)
