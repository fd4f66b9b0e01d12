"""A remote console (SPEC §10: `--allow-remote`): it refuses to start without
TLS, an access token file and allowed hosts; it serves real TLS (certificates of
the project's dev CA) and nothing in plaintext; every page wants the token
(Bearer, or the login form's session cookie: Secure, HttpOnly, SameSite=Strict,
not the token) else 401; a Host it does not serve gets 421, token or not; the
config's repr shows neither the DSN's password nor the token."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from qinglong.service.console.access import (
    MAX_REVOKED,
    SESSION_COOKIE,
    ConsoleAccess,
    RemoteServing,
    load_remote,
    token_digest,
)
from qinglong.service.console.config import ConsoleConfig, RemoteBindRefused
from tests.py.console_scenario import (
    REMOTE_HOST,
    RemoteFiles,
    Scenario,
    build_scenario,
    console_process,
    drop_role,
    readonly_dsn,
    remote_args,
    remote_files,
)
from tests.py.test_console_app import Dom


@dataclass(frozen=True)
class Reply:
    status: int
    headers: http.client.HTTPMessage
    body: str

    def cookie(self) -> str:
        (value,) = self.headers.get_all("Set-Cookie") or [""]
        return value


@dataclass(frozen=True)
class RemoteConsole:
    url: str
    port: int
    files: RemoteFiles

    @property
    def origin(self) -> str:
        return f"https://{REMOTE_HOST}:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        headers: dict[str, str] | None = None,
        body: str | None = None,
        host: str | None = None,
    ) -> Reply:
        """One HTTPS request (CA-verified, no redirect followed), `Host` as given."""
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, timeout=10, context=self.files.client_context()
        )
        try:
            sent = {"Host": host or f"{REMOTE_HOST}:{self.port}", **(headers or {})}
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            return Reply(response.status, response.headers, response.read().decode())
        finally:
            conn.close()

    def bearer(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.files.token}"}

    def login(self, token: str | None = None, **headers: str) -> Reply:
        form = {
            "Origin": self.origin,
            "Sec-Fetch-Site": "same-origin",
            "Content-Type": "application/x-www-form-urlencoded",
            **headers,
        }
        return self.request("POST", "/login", form, body=f"token={token or self.files.token}")


@pytest.fixture
def files(tmp_path: Path) -> RemoteFiles:
    return remote_files(tmp_path)


@pytest.fixture
def remote(
    db_dsn: str, pg_cluster, db_name: str, files: RemoteFiles
) -> Iterator[tuple[Scenario, RemoteConsole]]:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        scenario = build_scenario(conn)
        try:
            with console_process(
                readonly_dsn(conn, pg_cluster, db_name), *remote_args(files)
            ) as url:
                port = int(url.rstrip("/").rsplit(":", 1)[1])
                assert url == f"https://{REMOTE_HOST}:{port}/"
                yield scenario, RemoteConsole(url, port, files)
        finally:
            drop_role(conn, db_name)


def _console(*args: str) -> subprocess.CompletedProcess[str]:
    """`qinglong console` that must exit at once (a DSN nobody connects to)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "qinglong",
            "console",
            "--dsn",
            "host=127.0.0.1 port=1 dbname=none password=dsn-pass-123",
            "--port",
            "0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


REMOTE_FLAGS = ["--tls-cert", "--tls-key", "--auth-token-file", "--allowed-host"]


@pytest.mark.parametrize("missing", REMOTE_FLAGS)
def test_allow_remote_without_each_flag_refuses_to_start(files: RemoteFiles, missing: str) -> None:
    args = remote_args(files)
    at = args.index(missing)
    del args[at : at + 2]
    for host in ("0.0.0.0", "127.0.0.1"):
        refused = _console("--host", host, *args)
        assert refused.returncode == 2 and refused.stdout == "", refused
        assert f"--allow-remote requires {missing} " in refused.stderr, refused.stderr
        assert "(missing)" in refused.stderr and files.token not in refused.stderr


def test_remote_flags_without_allow_remote_or_non_loopback_alone_refuse(files: RemoteFiles) -> None:
    alone = _console("--host", "0.0.0.0")
    assert alone.returncode == 2 and "not a loopback address; pass --allow-remote" in alone.stderr
    stray = _console(*remote_args(files)[1:])
    assert stray.returncode == 2 and stray.stdout == ""
    assert (
        "--tls-cert, --tls-key, --auth-token-file, --allowed-host apply only with "
        "--allow-remote" in stray.stderr
    )
    bad_host = _console(*remote_args(files, "console.example:8443"))
    assert bad_host.returncode == 2 and "is not a host name or IP address" in bad_host.stderr


def test_unusable_token_or_tls_files_refuse_to_start(files: RemoteFiles, tmp_path: Path) -> None:
    def refused(*replace: tuple[str, str]) -> str:
        args = remote_args(files)
        for flag, value in replace:
            args[args.index(flag) + 1] = value
        result = _console(*args)
        assert result.returncode == 2 and result.stdout == "", result
        assert files.token not in result.stderr and "dsn-pass-123" not in result.stderr
        return result.stderr

    os.chmod(files.token_file, 0o640)
    assert "readable or writable by group/other (mode 0640); chmod 600" in refused()
    os.chmod(files.token_file, 0o604)
    assert "by group/other (mode 0604)" in refused()
    os.chmod(files.token_file, 0o600)
    short = tmp_path / "short.token"
    short.write_text("tooshort\n")
    short.chmod(0o600)
    assert "must hold one token of 32 to 1024" in refused(("--auth-token-file", str(short)))
    link = tmp_path / "link.token"
    link.symlink_to(files.token_file)
    assert "cannot open it" in refused(("--auth-token-file", str(link)))
    assert "cannot open it: No such file" in refused(("--auth-token-file", str(tmp_path / "x")))
    assert "--tls-cert" in refused(("--tls-cert", str(tmp_path / "none.pem")))
    assert "cannot load --tls-cert/--tls-key" in refused(("--tls-key", str(files.cert_file)))


def test_without_the_token_every_page_is_401(remote: tuple[Scenario, RemoteConsole]) -> None:
    scenario, console = remote
    for path in (
        "/",
        "/workers",
        f"/runs/{scenario.succeeded_run}",
        "/runs?state=queued",
        f"/runs/{scenario.succeeded_run}/log?attempt=1&offset=0",
    ):
        api_like = console.request("GET", path)
        assert api_like.status == 401, path
        assert json.loads(api_like.body) == {
            "error": "unauthorized",
            "reason": "missing_token",
            "message": "log in with the console's access token",
        }
        assert api_like.headers["WWW-Authenticate"] == 'Bearer realm="qinglong-console"'
        browser = console.request("GET", path, {"Accept": "text/html,*/*"})
        assert browser.status == 401 and "edge-1" not in browser.body
        forms = Dom(browser.body).tags("form")
        assert [(f.attrs["method"], f.attrs["action"]) for f in forms] == [("post", "/login")]
    # POST, forged cookies, a wrong token: 401 too, and the token presented never echoed.
    assert console.request("POST", "/runs").status == 401
    for cookie in ("x", "AAAA.BBBB", console.files.token):
        forged = console.request("GET", "/", {"Cookie": f"{SESSION_COOKIE}={cookie}"})
        assert forged.status == 401 and json.loads(forged.body)["reason"] == "invalid_token"
    wrong = "w" * 40
    for header in (
        f"Bearer {wrong}",
        f"Bearer {console.files.token}x",
        console.files.token,
        f"Basic {console.files.token}",
    ):
        answer = console.request("GET", "/", {"Authorization": header, "Accept": "text/html"})
        assert answer.status == 401, header
        assert wrong not in answer.body and console.files.token not in answer.body
        assert answer.headers["WWW-Authenticate"].endswith('error="invalid_token"')
    # The assets hold no data: the login page needs its stylesheet.
    assert console.request("GET", "/static/console.css").status == 200


def test_bearer_token_reads_every_page(remote: tuple[Scenario, RemoteConsole]) -> None:
    scenario, console = remote
    overview = console.request("GET", "/", console.bearer())
    assert overview.status == 200 and "edge-1" in Dom(overview.body).by_id("sessions")
    assert overview.headers["Referrer-Policy"] == "same-origin"
    for path in (
        "/workers",
        f"/runs/{scenario.succeeded_run}",
        "/runs?state=queued",
        f"/runs/{scenario.succeeded_run}/log?attempt=1&offset=0",
    ):
        assert console.request("GET", path, console.bearer()).status == 200, path
    for secret in [*scenario.secrets, console.files.token]:
        assert secret not in overview.body
    # Read-only still: only the login and logout POSTs exist.
    refused = console.request("POST", "/runs", console.bearer())
    assert refused.status == 405 and refused.headers["Allow"] == "GET, HEAD"
    logout_get = console.request("GET", "/logout", console.bearer())
    assert logout_get.status == 405 and logout_get.headers["Allow"] == "POST"


def _cookie_attributes(set_cookie: str) -> tuple[str, str, dict[str, str]]:
    first, *rest = (part.strip() for part in set_cookie.split(";"))
    name, _, value = first.partition("=")
    attrs = {}
    for part in rest:
        key, _, val = part.partition("=")
        attrs[key.lower()] = val
    return name, value, attrs


def test_login_form_sets_a_strict_session_cookie_then_pages_load(
    remote: tuple[Scenario, RemoteConsole],
) -> None:
    _, console = remote
    form = console.request("GET", "/login", {"Accept": "text/html"})
    assert form.status == 200 and Dom(form.body).tags("input")[0].attrs["type"] == "password"
    wrong = console.login("x" * 40)
    assert wrong.status == 401 and Dom(wrong.body).by_id("error") == "wrong token"
    assert "x" * 40 not in wrong.body and not wrong.headers.get_all("Set-Cookie")

    logged_in = console.login()
    assert logged_in.status == 303 and logged_in.headers["Location"] == "/"
    name, value, attrs = _cookie_attributes(logged_in.cookie())
    assert name == SESSION_COOKIE
    assert {"secure", "httponly"} <= set(attrs) and attrs["samesite"] == "Strict"
    assert attrs["path"] == "/" and "domain" not in attrs and int(attrs["max-age"]) > 0
    digest = token_digest(console.files.token)
    for form_of_token in (console.files.token, digest.hex(), console.files.token[:16]):
        assert form_of_token not in value, "the cookie holds the token"
    cookie = {"Cookie": f"{SESSION_COOKIE}={value}", "Accept": "text/html"}
    overview = console.request("GET", "/", cookie)
    assert overview.status == 200 and "edge-1" in Dom(overview.body).by_id("sessions")
    logout_forms = [f for f in Dom(overview.body).tags("form") if f.attrs["action"] == "/logout"]
    assert [f.attrs["method"] for f in logout_forms] == ["post"]
    assert console.request("GET", "/workers", cookie).status == 200
    again = console.request("GET", "/login", cookie)
    assert again.status == 303 and again.headers["Location"] == "/"

    logged_out = console.request("POST", "/logout", {**cookie, "Origin": console.origin})
    assert logged_out.status == 303 and logged_out.headers["Location"] == "/login"
    _, cleared, cleared_attrs = _cookie_attributes(logged_out.cookie())
    assert cleared in ("", '""') and cleared_attrs["max-age"] == "0"
    assert console.request("GET", "/", cookie).status == 401, "the session outlived its logout"
    assert hashlib.sha256(value.encode()).hexdigest() not in overview.body


def test_login_and_logout_posts_must_be_same_origin(remote: tuple[Scenario, RemoteConsole]) -> None:
    _, console = remote
    for headers in (
        {"Origin": ""},
        {"Origin": "https://attacker.example"},
        {"Origin": "null"},
        {"Origin": f"http://{REMOTE_HOST}:{console.port}"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ):
        refused = console.login(**headers)
        assert refused.status == 403, headers
        assert not refused.headers.get_all("Set-Cookie"), headers
        assert "cross-origin POST refused" in Dom(refused.body).by_id("error")
    value = _cookie_attributes(console.login().cookie())[1]
    cookie = {"Cookie": f"{SESSION_COOKIE}={value}"}
    forced = console.request("POST", "/logout", {**cookie, "Origin": "https://attacker.example"})
    assert forced.status == 403
    assert console.request("GET", "/", cookie).status == 200, "a cross-site logout went through"
    wrong_type = console.login(**{"Content-Type": "text/plain"})
    assert wrong_type.status == 415
    big = console.request(
        "POST",
        "/login",
        {"Origin": console.origin, "Content-Type": "application/x-www-form-urlencoded"},
        body="token=" + "a" * 10_000,
    )
    assert big.status == 413


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example",
        "attacker.example:{port}",
        "127.0.0.1:{port}",
        "localhost.attacker.example",
        "",
    ],
)
def test_a_foreign_host_is_421_even_with_the_token(
    remote: tuple[Scenario, RemoteConsole], host: str
) -> None:
    _, console = remote
    answer = console.request(
        "GET",
        "/",
        {**console.bearer(), "Accept": "text/html"},
        host=host.format(port=console.port) or " ",
    )
    assert answer.status == 421, answer.body[:300]
    assert Dom(answer.body).by_id("error").startswith("Host header names no host this console")
    assert "edge-1" not in answer.body
    assert console.request("POST", "/login", host="attacker.example").status == 421
    assert (
        console.request("GET", "/", console.bearer(), host=f"LOCALHOST:{console.port}").status
        == 200
    )


def test_plaintext_http_to_the_tls_port_fails(remote: tuple[Scenario, RemoteConsole]) -> None:
    _, console = remote
    conn = http.client.HTTPConnection("127.0.0.1", console.port, timeout=10)
    try:
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            conn.request(
                "GET", "/", headers={"Host": f"{REMOTE_HOST}:{console.port}", **console.bearer()}
            )
            conn.getresponse().read()
    finally:
        conn.close()
    # TLS 1.2 is enough; the certificate is the one the dev CA issued.
    legacy = console.files.client_context()
    legacy.maximum_version = ssl.TLSVersion.TLSv1_2
    with legacy.wrap_socket(
        socket.create_connection(("127.0.0.1", console.port), timeout=10),
        server_hostname=REMOTE_HOST,
    ) as tls:
        assert tls.version() == "TLSv1.2"


def test_config_repr_shows_no_password_and_access_no_token(files: RemoteFiles) -> None:
    for dsn in (
        "host=db.example user=console password=hunter2-secret dbname=ql",
        "postgresql://console:hunter2-secret@db.example/ql",
    ):
        config = ConsoleConfig(
            dsn=dsn,
            host="0.0.0.0",
            allow_remote=True,
            tls_cert=str(files.cert_file),
            tls_key=str(files.key_file),
            auth_token_file=str(files.token_file),
            allowed_hosts=("Console.Example", "[::1]"),
        )
        for shown in (repr(config), str(config), f"{config}"):
            assert "hunter2-secret" not in shown and "db.example" in shown
            assert "password='<redacted>'" in shown or "password=<redacted>" in shown, shown
        assert config.allowed_hosts == ("console.example", "::1")
        assert config.url == "https://console.example:8088/"
    assert "<unparsable DSN>" in repr(ConsoleConfig(dsn="password=x 'unterminated"))
    remote = load_remote(config)
    assert isinstance(remote, RemoteServing)
    assert remote.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_2
    digest = token_digest(files.token)
    for shown in (repr(remote), repr(remote.access)):
        assert files.token not in shown and digest.hex() not in shown
        assert repr(remote.access.session_key) not in shown and repr(digest) not in shown
    with pytest.raises(RemoteBindRefused, match="--allowed-host HOST"):
        ConsoleConfig(dsn="x", allow_remote=True, tls_cert="c", tls_key="k", auth_token_file="t")


def test_sessions_are_signed_expire_and_end_on_logout() -> None:
    access = ConsoleAccess(token_digest=token_digest("t" * 32), ttl_s=100)
    cookie = access.issue(now_s=1_000)
    session = access.session(cookie, now_s=1_050)
    assert session is not None and session.expires_s == 1_100
    assert access.session(cookie, now_s=1_100) is None, "expired"
    payload, mac = cookie.split(".")
    tampered = payload[:-2] + ("A" if payload[-2] != "A" else "B") + payload[-1]
    assert access.session(f"{tampered}.{mac}", now_s=1_050) is None
    assert ConsoleAccess(token_digest=access.token_digest).session(cookie, 1_050) is None, (
        "another process (key) accepted it"
    )
    access.revoke(session, now_s=1_050)
    assert access.session(cookie, now_s=1_050) is None
    # A full revocation list replaces the key rather than forgetting a logout.
    other = access.issue(now_s=1_050)
    access.revoked.update({i.to_bytes(16, "big"): 2_000 for i in range(MAX_REVOKED)})
    access.revoke(access.session(other, 1_050) or session, now_s=1_060)
    assert access.session(other, 1_060) is None and access.session(cookie, 1_060) is None
    assert access.token_matches("t" * 32) and not access.token_matches("t" * 31)
    assert not access.token_matches("é" * 32)
