"""Run a console until SIGINT/SIGTERM, printing its URL once it listens.

A remote console (--allow-remote) loads its TLS material and access token
before it binds: a file that cannot be used is a usage error (exit 2) and
nothing listens.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from dataclasses import replace

from aiohttp import web

from qinglong.service.console.access import RemoteServing, RemoteSetupError, load_remote
from qinglong.service.console.app import create_console_app
from qinglong.service.console.config import ConsoleConfig
from qinglong.service.tls import TlsConfigError

EXIT_USAGE = 2


async def _serve(config: ConsoleConfig, remote: RemoteServing | None) -> None:
    app = create_console_app(config, remote.access if remote else None)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(
            runner, config.host, config.port, ssl_context=remote.ssl_context if remote else None
        )
        await site.start()
        port = runner.addresses[0][1] if runner.addresses else config.port
        sys.stdout.write(f"console: {replace(config, port=port).url}\n")
        sys.stdout.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def serve_forever(config: ConsoleConfig) -> int:
    try:
        remote = load_remote(config)
    except (RemoteSetupError, TlsConfigError) as exc:
        sys.stderr.write(f"qinglong console: {exc}\n")
        return EXIT_USAGE
    try:
        asyncio.run(_serve(config, remote))
    except OSError as exc:
        sys.stderr.write(
            f"qinglong console: cannot listen on {config.host}:{config.port}: "
            f"{exc.strerror or exc}\n"
        )
        return 1
    return 0
