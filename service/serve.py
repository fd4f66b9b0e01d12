"""Run the ingress: TLS worker listener + plain-HTTP admin listener.

SIGTERM/SIGINT: stop accepting, finish in-flight requests (up to
`shutdown_timeout_s`), close the pool, exit 0. SIGHUP: reload the server
certificate chain and the worker CA bundle (new handshakes only; a file that
cannot be used keeps the previous ones, logs `tls.reload_failed` and counts
`qinglong_ingress_tls_reloads_total{outcome="failed"}`).

`--processes 1` serves in this process; more run under service/supervisor.py,
each child calling `serve()` with `reuse_port` and reporting its URLs instead of
writing the ready file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass
from typing import TextIO

from aiohttp import web

from qinglong.service.admin_app import create_admin_app
from qinglong.service.app import build_state, create_app
from qinglong.service.audit import AuditLog, Emit, stream_emitter
from qinglong.service.config import ConfigError, IngressConfig, load_config
from qinglong.service.jsonlog import configure_logging
from qinglong.service.listener import runner_kwargs
from qinglong.service.metrics import IngressMetrics
from qinglong.service.secrets_crypto import SecretsError
from qinglong.service.state import PROJECTION_HOOK, IngressState, ProjectionHook
from qinglong.service.supervisor import ReadyReport, Supervisor, write_ready_file
from qinglong.service.tls import ServerTls, TlsConfigError, server_tls
from qinglong.service.tls_site import ListenerLimits, TlsSite

log = logging.getLogger("qinglong.ingress")


@dataclass
class RunningIngress:
    state: IngressState
    tls: ServerTls
    app: web.Application
    runner: web.AppRunner
    admin_runner: web.AppRunner
    site: TlsSite
    admin_site: web.TCPSite

    @property
    def port(self) -> int:
        return self.site.port

    @property
    def admin_port(self) -> int:
        return self.admin_site.port

    @property
    def urls(self) -> dict[str, str]:
        host = self.state.config.host
        admin = self.state.config.admin_host
        return {
            "ingressUrl": f"https://{_url_host(host)}:{self.port}",
            "adminUrl": f"http://{_url_host(admin)}:{self.admin_port}",
        }

    async def stop(self) -> None:
        # Worker listener first (stops accepting, drains in-flight, closes the
        # pool), then the admin listener, so /metrics stays up during the drain.
        await self.runner.cleanup()
        await self.admin_runner.cleanup()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def audit_emitter(target: str) -> tuple[Emit, TextIO | None]:
    """The audit stream: stderr, stdout or an append-only file (returned to close)."""
    if target == "stderr":
        return stream_emitter(sys.stderr), None
    if target == "stdout":
        return stream_emitter(sys.stdout), None
    handle = open(target, "a", encoding="utf-8")  # closed by serve()
    return stream_emitter(handle), handle


async def start_ingress(
    config: IngressConfig,
    *,
    audit: AuditLog,
    metrics: IngressMetrics | None = None,
    projection_hook: ProjectionHook | None = None,
    reuse_port: bool = False,
) -> RunningIngress:
    tls = server_tls(config.cert_file, config.key_file, config.client_ca_file)
    state = build_state(config, audit, metrics)
    app = create_app(state)
    if projection_hook is not None:
        app[PROJECTION_HOOK] = projection_hook
    runner = web.AppRunner(app, **runner_kwargs(config.header_timeout_s, config.shutdown_timeout_s))
    await runner.setup()
    admin_runner = web.AppRunner(create_admin_app(state), access_log=None)
    try:
        site = TlsSite(
            runner,
            config.host,
            config.port,
            tls=tls,
            limits=ListenerLimits.from_config(config),
            metrics=state.metrics,
            reuse_port=reuse_port,
        )
        await site.start()
        await admin_runner.setup()
        admin_site = web.TCPSite(admin_runner, config.admin_host, config.admin_port)
        await admin_site.start()
    except BaseException:
        # A port in use: close the pool (opened by runner.setup) before reporting.
        await runner.cleanup()
        if admin_runner.server is not None:
            await admin_runner.cleanup()
        raise
    return RunningIngress(state, tls, app, runner, admin_runner, site, admin_site)


def reload_tls(running: RunningIngress) -> bool:
    """SIGHUP: new server chain and worker CA bundle for new handshakes."""
    try:
        running.tls.reload()
    except TlsConfigError:  # already logged; the previous context stays in use
        running.state.metrics.tls_reloads.inc("failed")
        return False
    running.state.metrics.tls_reloads.inc("ok")
    return True


async def serve(
    config: IngressConfig, *, reuse_port: bool = False, report: ReadyReport | None = None
) -> int:
    """Serve until SIGTERM/SIGINT. `report` (a supervised child) receives the
    listening URLs instead of the ready file being written."""
    emit, audit_handle = audit_emitter(config.audit_log)
    try:
        running = await start_ingress(config, audit=AuditLog(emit), reuse_port=reuse_port)
    except (TlsConfigError, OSError, SecretsError) as exc:
        log.error(
            "ingress failed to start",
            extra={
                "event": "ingress.start_failed",
                "error": type(exc).__name__,
                "detail": str(exc)[:200],
            },
        )
        return 2
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, reload_tls, running)
    ready: dict[str, object] = {**running.urls, "pid": os.getpid()}
    if report is not None:
        report(ready)
    else:
        if config.ready_file:
            write_ready_file(config.ready_file, ready)
        print(json.dumps({"event": "listening", **ready}), flush=True)
    log.info("ingress listening", extra={"event": "ingress.listening", **running.urls})
    try:
        await stop.wait()
        log.info("shutting down", extra={"event": "ingress.stopping"})
    finally:
        await running.stop()
        if audit_handle is not None:
            audit_handle.close()
    return 0


def serve_command(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(json.dumps({"error": "invalid_config", "detail": str(exc)}), file=sys.stderr)
        return 2
    configure_logging(config.log_level)
    processes = args.processes or os.cpu_count() or 1
    if processes == 1:
        return asyncio.run(serve(config))
    return Supervisor(config, processes, _supervised_child).run()


def _supervised_child(config: IngressConfig, report: ReadyReport) -> int:
    return asyncio.run(serve(config, reuse_port=True, report=report))
