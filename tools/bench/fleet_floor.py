"""`bench fleet`'s floor: what serving the fleet's requests costs before the ingress
does any of its own work.

`python -m tools.bench.fleet_floor CONFIG.json`. A minimal aiohttp application
on the ingress's TLS 1.3 context (service/tls.py: client certificate required)
that answers the fleet's three requests with fixed documents: the session open
with a new session id (201), a heartbeat with the session (200), a pull with
the idle answer and the ingress's retry guidance (200, retry after 2 s + up to
1 s). It reads each body and parses its JSON, as any server must, and does
nothing else: no credential, no identity, no schema check, no database, no
audit line, no metrics, no connection caps.

Driven by the same driver processes as the ingress, its CPU per pull is the
framework's and TLS's own cost per request on the machine (aiohttp's request
handling, asyncio's TLS layer, the system calls): the part of the ingress's
figure that its own code cannot remove.

CONFIG: {"certFile", "keyFile", "clientCaFile", "readyFile"}; the ready file
gets {"ingressUrl": "https://127.0.0.1:PORT"} once it listens.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import uuid
from pathlib import Path
from typing import Any

from aiohttp import web

from qinglong.service.idle_answer import idle_body
from qinglong.service.idle_view import IDLE_RESULT
from qinglong.service.tls import build_context

HEARTBEAT_INTERVAL_MS = 20_000


def _answer(status: int, doc: dict[str, Any]) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(doc, separators=(",", ":")).encode(),
        content_type="application/json",
    )


async def _session(request: web.Request) -> web.Response:
    doc = json.loads(await request.read())
    return _answer(201, {"schema": "qinglong/session@v1", "workerId": doc["workerId"],
                         "sessionId": str(uuid.uuid4()), "generation": 1,
                         "heartbeatIntervalMs": HEARTBEAT_INTERVAL_MS})  # fmt: skip


async def _heartbeat(request: web.Request) -> web.Response:
    doc = json.loads(await request.read())
    return _answer(200, {"schema": "qinglong/session@v1", "workerId": doc["workerId"],
                         "sessionId": doc["sessionId"], "generation": doc["generation"],
                         "heartbeatIntervalMs": HEARTBEAT_INTERVAL_MS})  # fmt: skip


async def _pull(request: web.Request) -> web.Response:
    json.loads(await request.read())
    # The ingress's own idle document (the database's empty-queue envelope).
    return _answer(200, idle_body(IDLE_RESULT, 2000 + random.randint(0, 1000)))


def create_app() -> web.Application:
    app = web.Application()
    app.router.add_post("/v1/sessions", _session)
    app.router.add_post("/v1/sessions/heartbeat", _heartbeat)
    app.router.add_post("/v1/offers/pull", _pull)
    return app


async def _serve(config: dict[str, str]) -> None:
    context = build_context(config["certFile"], config["keyFile"], config["clientCaFile"])
    runner = web.AppRunner(create_app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context, backlog=4096)
    await site.start()
    port = runner.addresses[0][1]
    Path(config["readyFile"]).write_text(
        json.dumps({"ingressUrl": f"https://127.0.0.1:{port}"}), encoding="utf-8"
    )
    await asyncio.Event().wait()


def main(argv: list[str]) -> int:
    asyncio.run(_serve(json.loads(Path(argv[0]).read_text(encoding="utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
