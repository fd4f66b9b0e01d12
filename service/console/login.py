"""Who may read a remote console (SPEC §10): the access token, presented as
`Authorization: Bearer <token>` or once through the console's own login form,
which sets a session cookie (`Secure; HttpOnly; SameSite=Strict`, `__Host-`
name) that is not the token (service/console/access.py).

The form is a POST; so is logging out. Both are refused (403) unless the
request is same-origin: its `Origin` is this console's own (`https://` + the
Host that passed the allowed-host check) and, when the browser sends it,
`Sec-Fetch-Site` is `same-origin`. With the SameSite=Strict cookie, another
site can neither log a browser in nor out. A 401 is the login page for a
browser (`Accept: text/html`) and JSON for anything else; neither echoes what
was presented.
"""

from __future__ import annotations

import time

from aiohttp import web

from qinglong.service.console.access import SESSION_COOKIE, ConsoleAccess, Denial
from qinglong.service.console.layout import page
from qinglong.service.console.markup import el
from qinglong.service.console.reader import ConsoleError
from qinglong.service.console.views import html_response

ACCESS: web.AppKey[ConsoleAccess] = web.AppKey("qinglong_console_access", ConsoleAccess)
# Pages a request without the token may reach (assets hold no data).
OPEN_PATHS = frozenset({"/login", "/logout"})
OPEN_PREFIX = "/static/"
LOGIN_FORM_LIMIT = 4096
FORM_TYPE = "application/x-www-form-urlencoded"
REALM = 'Bearer realm="qinglong-console"'
_MESSAGES = {
    Denial.MISSING: "log in with the console's access token",
    Denial.INVALID: "the token or session is not valid (wrong token, logged out, expired "
    "or the console restarted): log in again",
}


def _now_s() -> int:
    return int(time.time())


def needs_token(request: web.Request) -> bool:
    return request.path not in OPEN_PATHS and not request.path.startswith(OPEN_PREFIX)


def authenticate(request: web.Request) -> Denial | None:
    """None when the request presents the token (Bearer) or a live session cookie.

    An Authorization header decides on its own: a wrong one is not rescued by a cookie.
    """
    access = request.app[ACCESS]
    header = request.headers.get("Authorization")
    if header is not None:
        return access.bearer(header)
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie is None:
        return Denial.MISSING
    return None if access.session(cookie, _now_s()) is not None else Denial.INVALID


def login_page(message: str | None, status: int = 200) -> web.Response:
    """The login form, server-rendered; `message` (never the token) above it."""
    form = el(
        "form",
        el("label", "Access token", for_="token"),
        el(
            "input",
            type="password",
            name="token",
            id="token",
            required=True,
            autocomplete="current-password",
            autofocus=True,
        ),
        el("button", "Log in", type="submit", id="login-submit"),
        method="post",
        action="/login",
        id="login",
        class_="login",
    )
    notice = el("p", message, class_="error", id="error") if message else None
    markup = page(
        title="Log in", current="", now_ms=int(time.time() * 1000), refresh_s=0, body=[notice, form]
    )
    return html_response(markup, status=status)


def unauthorized(request: web.Request, denial: Denial) -> web.Response:
    """401: the login page for a browser, JSON for an API-like client."""
    message = _MESSAGES[denial]
    if "text/html" in request.headers.get("Accept", ""):
        response = login_page(message, status=401)
    else:
        response = web.json_response(
            {"error": "unauthorized", "reason": denial.value, "message": message}, status=401
        )
    challenge = REALM if denial is Denial.MISSING else f'{REALM}, error="invalid_token"'
    response.headers["WWW-Authenticate"] = challenge
    return response


def same_origin(request: web.Request) -> bool:
    """Whether a POST comes from a page of this console (CSRF check)."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site != "same-origin":
        return False
    origin = request.headers.get("Origin", "").lower()
    return bool(origin) and origin == f"https://{request.headers.get('Host', '').lower()}"


def _check_post(request: web.Request) -> None:
    if not same_origin(request):
        raise ConsoleError(
            403, "cross-origin POST refused: log in and out from the console's own pages"
        )


async def _form_token(request: web.Request) -> str | None:
    """The one `token` field of a small urlencoded form, else None."""
    if request.content_type != FORM_TYPE:
        raise ConsoleError(415, f"the login form is {FORM_TYPE}")
    try:
        form = await request.post()
    except web.HTTPRequestEntityTooLarge:
        raise ConsoleError(413, f"the login form is at most {LOGIN_FORM_LIMIT} bytes") from None
    values = form.getall("token", [])
    return values[0] if len(values) == 1 and isinstance(values[0], str) else None


async def login_form(request: web.Request) -> web.Response:
    """GET /login: the form, or straight to the overview when already logged in."""
    if authenticate(request) is None:
        return web.Response(status=303, headers={"Location": "/"})
    return login_page(None)


async def login(request: web.Request) -> web.Response:
    """POST /login: the right token sets the session cookie and goes to the overview."""
    _check_post(request)
    access = request.app[ACCESS]
    token = await _form_token(request)
    if token is None or not access.token_matches(token):
        return login_page("wrong token", status=401)
    response = web.Response(status=303, headers={"Location": "/"})
    response.set_cookie(
        SESSION_COOKIE,
        access.issue(_now_s()),
        max_age=access.ttl_s,
        path="/",
        secure=True,
        httponly=True,
        samesite="Strict",
    )
    return response


async def logout(request: web.Request) -> web.Response:
    """POST /logout: the session ends here (revoked) and in the browser (cookie cleared)."""
    _check_post(request)
    access = request.app[ACCESS]
    cookie = request.cookies.get(SESSION_COOKIE)
    session = access.session(cookie, _now_s()) if cookie is not None else None
    if session is not None:
        access.revoke(session, _now_s())
    response = web.Response(status=303, headers={"Location": "/login"})
    response.set_cookie(
        SESSION_COOKIE, "", max_age=0, path="/", secure=True, httponly=True, samesite="Strict"
    )
    return response
