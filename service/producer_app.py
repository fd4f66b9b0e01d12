"""The producer API (SPEC §13.4): `qinglong api serve --config FILE [--processes N]`.

An aiohttp HTTPS service, separate from the worker ingress: a server
certificate, TLS 1.2 or newer, no client certificate (callers authenticate
with a project token, checked by the database on every call). It reuses the
ingress's building blocks: the gateway (pool, classification, 503s), the
SQLSTATE table, strict JSON and the schemas, the body limits, the JSON log and
audit streams, and the supervisor for several processes on one port.

A plain-HTTP admin listener (loopback) answers /healthz and /readyz.
SIGTERM/SIGINT: stop accepting, finish in-flight requests, close the pool.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import ssl
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web

from qinglong.service import producer_logs
from qinglong.service import producer_views as views
from qinglong.service.audit import Emit
from qinglong.service.config import ConfigError
from qinglong.service.jsonlog import configure_logging
from qinglong.service.listener import runner_kwargs
from qinglong.service.producer_config import ProducerConfig, load_producer_config
from qinglong.service.producer_openapi import render_bytes
from qinglong.service.serve import audit_emitter
from qinglong.service.supervisor import ReadyReport, Supervisor, write_ready_file

log = logging.getLogger("qinglong.api")


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """TLS 1.2+ with the server certificate; no client certificate asked for."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(cert_file, key_file)
    return ctx


async def _database_pool(app: web.Application) -> AsyncIterator[None]:
    state = app[views.PRODUCER]
    await state.gateway.open()
    yield
    await state.gateway.close()


def create_producer_app(config: ProducerConfig, audit: Emit) -> web.Application:
    # client_max_size is aiohttp's backstop; read_body enforces max_body_bytes first.
    app = web.Application(
        client_max_size=config.max_body_bytes, middlewares=[views.producer_envelope]
    )
    app[views.PRODUCER] = views.new_state(config, audit)
    app.cleanup_ctx.append(_database_pool)
    views.add_routes(app, render_bytes())
    producer_logs.install_followers(app, config.log_followers_max, config.log_followers_per_token)
    return app


def _admin_app(state: views.ProducerState) -> web.Application:
    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        if await state.gateway.ready(1.0):
            return web.json_response({"status": "ready"})
        return web.json_response(
            {"status": "unavailable", "reason": "database_unavailable"}, status=503
        )

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


@dataclass
class RunningApi:
    runner: web.AppRunner
    admin_runner: web.AppRunner
    site: web.TCPSite
    admin_site: web.TCPSite
    config: ProducerConfig

    @property
    def urls(self) -> dict[str, str]:
        api = f"https://{_url_host(self.config.host)}:{_port(self.site)}"
        admin = f"http://{_url_host(self.config.admin_host)}:{_port(self.admin_site)}"
        return {"apiUrl": api, "adminUrl": admin}

    async def stop(self) -> None:
        await self.runner.cleanup()
        await self.admin_runner.cleanup()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _port(site: web.TCPSite) -> int:
    server = site._server  # aiohttp keeps the asyncio server here
    assert isinstance(server, asyncio.Server) and server.sockets
    return int(server.sockets[0].getsockname()[1])


async def start_api(config: ProducerConfig, audit: Emit, *, reuse_port: bool = False) -> RunningApi:
    context = server_context(config.cert_file, config.key_file)
    app = create_producer_app(config, audit)
    runner = web.AppRunner(app, **runner_kwargs(config.header_timeout_s, config.shutdown_timeout_s))
    await runner.setup()
    admin_runner = web.AppRunner(_admin_app(app[views.PRODUCER]), access_log=None)
    try:
        site = web.TCPSite(
            runner, config.host, config.port, ssl_context=context, reuse_port=reuse_port or None
        )
        await site.start()
        await admin_runner.setup()
        admin_site = web.TCPSite(admin_runner, config.admin_host, config.admin_port)
        await admin_site.start()
    except BaseException:
        await runner.cleanup()
        if admin_runner.server is not None:
            await admin_runner.cleanup()
        raise
    return RunningApi(runner, admin_runner, site, admin_site, config)


async def serve(
    config: ProducerConfig, *, reuse_port: bool = False, report: ReadyReport | None = None
) -> int:
    emit, handle = audit_emitter(config.audit_log)
    try:
        running = await start_api(config, emit, reuse_port=reuse_port)
    except (OSError, ssl.SSLError) as exc:
        log.error(
            "producer API failed to start",
            extra={"event": "api.start_failed", "error": type(exc).__name__},
        )
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    ready: dict[str, object] = {**running.urls, "pid": os.getpid()}
    if report is not None:
        report(ready)
    else:
        if config.ready_file:
            write_ready_file(config.ready_file, ready)
        print(json.dumps({"event": "listening", **ready}), flush=True)
    log.info("producer API listening", extra={"event": "api.listening", **running.urls})
    try:
        await stop.wait()
    finally:
        await running.stop()
        if handle is not None:
            handle.close()
    return 0


def serve_command(args: argparse.Namespace) -> int:
    try:
        config = load_producer_config(args.config)
    except ConfigError as exc:
        print(json.dumps({"error": "invalid_config", "detail": str(exc)}), file=sys.stderr)
        return 2
    configure_logging(config.log_level)
    processes = args.processes or 1
    if processes == 1:
        return asyncio.run(serve(config))
    # The supervisor reads host, port, admin_port, ready_file and shutdown_timeout_s.
    return _ApiSupervisor(config, processes, _child).run()  # type: ignore[arg-type]


class _ApiSupervisor(Supervisor):
    """The ingress's supervisor, announcing the API's URL (`apiUrl`) once every
    child listens: {apiUrl, adminUrl, adminUrls, pid, processes, childPids}."""

    def _announce(self) -> None:
        first = self.children[0].ready
        assert first is not None
        doc: dict[str, object] = {
            "apiUrl": first["apiUrl"],
            "adminUrl": first["adminUrl"],
            "adminUrls": [c.ready["adminUrl"] for c in self.children if c.ready],
            "pid": os.getpid(),
            "processes": self.processes,
            "childPids": [c.pid for c in self.children],
        }
        if self.config.ready_file:
            write_ready_file(self.config.ready_file, doc)
        if not self._announced:
            self._announced = True
            print(json.dumps({"event": "listening", **doc}), flush=True)


def _child(config: ProducerConfig, report: ReadyReport) -> int:
    return asyncio.run(serve(config, reuse_port=True, report=report))
