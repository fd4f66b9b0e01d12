"""The console's aiohttp application factory (SPEC §10).

Read-only by construction: only GET and HEAD reach a handler (anything else is
405 before routing), every page is built from `ql_readonly` reads, and every
answer carries a Content-Security-Policy that allows the console's own script
and stylesheet only (no inline script, no other origin). `Server-Timing` gives
each page's server time (the bench reads it).

A loopback console has no login: binding loopback is its access control, so
it also refuses (400) a request whose Host header names anything but a loopback
name or the configured host: a hostile page that rebinds its own domain to
127.0.0.1 (DNS rebinding) would otherwise read every page. A remote console
(--allow-remote, served over TLS by serve.py) answers only the --allowed-host
names (421 for any other Host, token or not), then wants the access token on
every request but the login form and the assets (401, service/console/login.py);
its only non-GET requests are the login and logout POSTs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

from qinglong.service.console import login, views
from qinglong.service.console.access import ConsoleAccess
from qinglong.service.console.config import ConsoleConfig
from qinglong.service.console.reader import ConsoleError, Reader
from qinglong.service.console.static_files import load_static

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LOG = logging.getLogger("qinglong.console")
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})

READ_METHODS = frozenset({"GET", "HEAD"})
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; "
        "img-src 'self'; connect-src 'self'; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def host_name(header: str) -> str:
    """The name part of a Host header value: without its port, an IPv6 literal unbracketed."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def host_allowed(header: str | None, config: ConsoleConfig) -> bool:
    """Whether a request's Host header may reach a page: a loopback console's own
    names, or exactly the --allowed-host names of a remote one."""
    if not header:
        return False
    if config.allow_remote:
        return host_name(header) in config.allowed_hosts
    return host_name(header) in LOOPBACK_NAMES | {config.host.lower()}


def _misdirected(request: web.Request, config: ConsoleConfig) -> web.Response:
    if config.allow_remote:
        return views.error_page(
            request,
            ConsoleError(421, "Host header names no host this console serves (its --allowed-host)"),
        )
    return views.error_page(
        request,
        ConsoleError(
            400,
            "Host header names no loopback address of this console (a console "
            "without --allow-remote answers only 127.0.0.1, localhost or [::1])",
        ),
    )


def _methods(request: web.Request, config: ConsoleConfig) -> frozenset[str]:
    """The methods `request.path` answers: GET/HEAD, plus POST to log in and out."""
    if config.allow_remote and request.path == "/logout":
        return frozenset({"POST"})
    if config.allow_remote and request.path == "/login":
        return READ_METHODS | {"POST"}
    return READ_METHODS


async def _answer(request: web.Request, handler: Handler) -> web.StreamResponse:
    config = request.app[views.CONFIG]
    if not host_allowed(request.headers.get("Host"), config):
        return _misdirected(request, config)
    if config.allow_remote and login.needs_token(request):
        denial = login.authenticate(request)
        if denial is not None:
            return login.unauthorized(request, denial)
    allowed = _methods(request, config)
    if request.method not in allowed:
        refused = views.error_page(
            request,
            ConsoleError(
                405,
                "the console is read-only: only GET and HEAD"
                if allowed == READ_METHODS
                else f"{request.path} answers {', '.join(sorted(allowed))} only",
            ),
        )
        refused.headers["Allow"] = ", ".join(sorted(allowed, key=["GET", "HEAD", "POST"].index))
        return refused
    try:
        return await handler(request)
    except ConsoleError as exc:
        return views.error_page(request, exc)
    except web.HTTPNotFound:
        return views.error_page(request, ConsoleError(404, "no such page"))
    except web.HTTPException:
        raise
    except Exception:  # a bug: logged, answered as the console's own page
        LOG.exception("console: %s %s failed", request.method, request.path)
        return views.error_page(
            request, ConsoleError(500, "internal error (see the console's log)")
        )


@web.middleware
async def read_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Check Host; refuse every method but GET/HEAD; render errors as pages; time it."""
    started = time.perf_counter()
    response = await _answer(request, handler)
    response.headers.update(SECURITY_HEADERS)
    if request.app[views.CONFIG].allow_remote:
        # The login and logout forms are POSTs: with no-referrer a browser sends
        # them `Origin: null`, and the same-origin check needs the real origin.
        response.headers["Referrer-Policy"] = "same-origin"
    if "Cache-Control" not in response.headers:
        response.headers["Cache-Control"] = "no-store"
    elapsed_ms = (time.perf_counter() - started) * 1000
    response.headers["Server-Timing"] = f"app;dur={elapsed_ms:.2f}"
    return response


def create_console_app(
    config: ConsoleConfig, access: ConsoleAccess | None = None
) -> web.Application:
    """The console; a remote one (--allow-remote) needs its `access` (token, sessions)."""
    if config.allow_remote and access is None:
        raise ValueError("a remote console needs its access token (ConsoleAccess)")
    app = web.Application(middlewares=[read_only], client_max_size=login.LOGIN_FORM_LIMIT)
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
    app.router.add_get("/runs/{run_id}/log", views.run_log)
    app.router.add_get("/workers", views.workers_page)
    app.router.add_get("/static/{name}", views.static_file)
    if access is not None and config.allow_remote:
        app[login.ACCESS] = access
        app.router.add_get("/login", login.login_form)
        app.router.add_post("/login", login.login)
        app.router.add_post("/logout", login.logout)
    return app
