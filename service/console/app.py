"""The console's aiohttp application factory (SPEC §10).

Read-only by construction: only GET and HEAD reach a handler (anything else is
405 before routing), every page is built from `ql_readonly` reads, and every
answer carries a Content-Security-Policy that allows the console's own script
and stylesheet only (no inline script, no other origin). `Server-Timing` gives
each page's server time (the bench reads it).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from qinglong.service.console import views
from qinglong.service.console.config import ConsoleConfig
from qinglong.service.console.reader import ConsoleError, Reader
from qinglong.service.console.static_files import load_static

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

READ_METHODS = frozenset({"GET", "HEAD"})
SECURITY_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; "
                                "img-src 'self'; connect-src 'self'; form-action 'self'; "
                                "base-uri 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


@web.middleware
async def read_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse every method but GET/HEAD; render errors as pages; time the answer."""
    started = time.perf_counter()
    if request.method not in READ_METHODS:
        response: web.StreamResponse = views.error_page(
            request, ConsoleError(405, "the console is read-only: only GET and HEAD"))
        response.headers["Allow"] = "GET, HEAD"
    else:
        try:
            response = await handler(request)
        except ConsoleError as exc:
            response = views.error_page(request, exc)
        except web.HTTPNotFound:
            response = views.error_page(request, ConsoleError(404, "no such page"))
    response.headers.update(SECURITY_HEADERS)
    if "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = "no-store"
    elapsed_ms = (time.perf_counter() - started) * 1000
    response.headers["Server-Timing"] = f"app;dur={elapsed_ms:.2f}"
    return response


def create_console_app(config: ConsoleConfig) -> web.Application:
    app = web.Application(middlewares=[read_only])
    app[views.CONFIG] = config
    app[views.STATIC] = load_static()

    async def reader_ctx(app: web.Application) -> AsyncIterator[None]:
        reader = Reader(config.dsn)
        await reader.open()
        app[views.READER] = reader
        yield
        await reader.close()

    app.cleanup_ctx.append(reader_ctx)
    app.router.add_get("/", views.overview_page)
    app.router.add_get("/runs", views.runs_page)
    app.router.add_get("/runs/{run_id}", views.run_page)
    app.router.add_get("/workers", views.workers_page)
    app.router.add_get("/static/{name}", views.static_file)
    return app
