"""The console in a real browser: headless Chromium (Debian's package, which
scripts/test.sh installs when missing) loads each page of a running console
over a demo-like database, and the test reads the DOM Chromium built: the
expected runs, workers and states are there, an output tail holding
`<script>alert(1)</script>` is text (no script element came of it), the page
refreshed itself in place, and a screenshot of each page is saved under the
test's tmp dir; and a refresh that fails shows a "stale since" marker. A
remote console (`--allow-remote`, TLS from the dev CA) is logged into through
its form by Chromium driven over the DevTools protocol: the overview loads, the
session cookie is Secure, HttpOnly and SameSite=Strict, and logging out ends it."""

from __future__ import annotations

import asyncio
import base64
import http.server
import json
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psycopg
import pytest

from qinglong.service.console.access import SESSION_COOKIE
from tests.py.console_scenario import (
    XSS_LABEL,
    XSS_TAIL,
    RemoteFiles,
    Scenario,
    build_scenario,
    console_process,
    drop_role,
    readonly_dsn,
    remote_args,
    remote_files,
    stop_process,
)
from tests.py.test_console_app import Dom

# Virtual time lets the page's script run (and its refresh timer fire) without
# the test sleeping: Chromium advances its clock while the page is idle.
VIRTUAL_TIME_MS = 5000


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError(
        "headless Chromium missing: apt-get install chromium (scripts/test.sh does it)"
    )


def _run(profile: Path, *args: str) -> str:
    cmd = [
        chromium(),
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={VIRTUAL_TIME_MS}",
        *args,
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def load(url: str, tmp_path: Path, shot: str) -> Dom:
    """The DOM after the page ran for VIRTUAL_TIME_MS; a PNG of it as `shot`."""
    profile = tmp_path / "chromium-profile"
    dom = _run(profile, "--dump-dom", url)
    png = tmp_path / shot
    _run(profile, "--window-size=1280,1700", f"--screenshot={png}", url)
    assert png.stat().st_size > 10_000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return Dom(dom)


@pytest.fixture
def scenario_console(db_dsn: str, pg_cluster, db_name: str) -> Iterator[tuple[Scenario, str]]:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        scenario = build_scenario(conn)
        try:
            with console_process(
                readonly_dsn(conn, pg_cluster, db_name), "--refresh-s", "2"
            ) as url:
                yield scenario, url
        finally:
            drop_role(conn, db_name)


def test_pages_in_a_browser(scenario_console: tuple[Scenario, str], tmp_path: Path) -> None:
    scenario, url = scenario_console

    overview = load(url, tmp_path, "overview.png")
    assert overview.by_id("generated").startswith("read-only")
    counts = {
        e.attrs["data-state"]: "".join(e.text)
        for e in overview.elements
        if e.attrs.get("data-state")
    }
    assert counts["queued"] == "3" and counts["succeeded"] == "1" and counts["failed"] == "1"
    assert "edge-1" in overview.by_id("sessions")
    assert scenario.train_run in overview.by_id("waiting-runs")
    assert [e.attrs.get("id") for e in overview.tags("svg")] == ["throughput-chart"]
    body = overview.tags("body")[0]
    assert body.attrs.get("data-refreshed"), "console.js did not refresh the page in place"

    runs = load(f"{url}runs?state=queued", tmp_path, "runs.png")
    listed = runs.by_id("runs")
    assert all(r in listed for r in scenario.queued_runs) and scenario.succeeded_run not in listed

    run = load(f"{url}runs/{scenario.succeeded_run}", tmp_path, "run.png")
    assert ["".join(e.text) for e in run.tags("pre")] == [XSS_TAIL], "output tail not shown as text"
    assert [e.attrs.get("src") for e in run.tags("script")] == ["/static/console.js"], (
        "the output tail became a script element"
    )
    assert "succeeded" in run.by_id("run")

    workers = load(f"{url}workers", tmp_path, "workers.png")
    table = workers.by_id("workers")
    assert "edge-1" in table and "gpu-box" in table and "retired" in table
    assert f"note={XSS_LABEL}" in table, "the label value is shown as text"
    assert not workers.tags("img"), "a label value became an element"
    assert "disabled" in table
    # What each worker is trusted with, and its full id to copy (SPEC §13).
    assert "every pool" in table and "self-labels on" in table
    ids = ["".join(e.text) for e in workers.tags("code") if e.attrs.get("class") == "worker-id"]
    assert len(ids) == 3 and all(re.fullmatch(r"[0-9a-f-]{36}", i) for i in ids), ids

    shots = sorted(p.name for p in tmp_path.glob("*.png"))
    assert shots == ["overview.png", "run.png", "runs.png", "workers.png"]


class _FailAfterFirstPage(http.server.BaseHTTPRequestHandler):
    """Fault injection in front of a real console: the first GET of a page is
    passed through, every later one (the in-page refresh) answers 503."""

    upstream = ""
    pages_served = 0

    def do_GET(self) -> None:
        cls = type(self)
        if not self.path.startswith("/static/"):
            if cls.pages_served > 0:
                self._answer(503, b"database unavailable", "text/plain")
                return
            cls.pages_served += 1
        with urllib.request.urlopen(cls.upstream + self.path, timeout=10) as response:
            self._answer(response.status, response.read(), response.headers["Content-Type"])

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_failed_refresh_shows_a_stale_marker(
    scenario_console: tuple[Scenario, str], tmp_path: Path
) -> None:
    """The page loads, then its refreshes get 503: it keeps the last page and
    shows "stale since HH:MM:SS UTC" (hidden while refreshes succeed)."""
    _, url = scenario_console
    healthy = Dom(_run(tmp_path / "profile-ok", "--dump-dom", url))
    assert healthy.tags("body")[0].attrs.get("data-refreshed")
    marker = [e for e in healthy.elements if e.attrs.get("id") == "stale"]
    assert marker and "hidden" in marker[0].attrs and healthy.by_id("stale") == ""

    handler = type(
        "Handler", (_FailAfterFirstPage,), {"upstream": url.rstrip("/"), "pages_served": 0}
    )
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        stale = Dom(
            _run(
                tmp_path / "profile-stale",
                "--dump-dom",
                f"http://127.0.0.1:{proxy.server_address[1]}/",
            )
        )
    finally:
        proxy.shutdown()
        proxy.server_close()
        thread.join(timeout=10)
    assert handler.pages_served == 1
    marker = [e for e in stale.elements if e.attrs.get("id") == "stale"]
    assert marker and "hidden" not in marker[0].attrs, "the stale marker is not shown"
    assert re.fullmatch(r"stale since \d\d:\d\d:\d\d UTC", stale.by_id("stale"))
    body = stale.tags("body")[0]
    assert body.attrs.get("data-stale") == "true" and not body.attrs.get("data-refreshed")
    assert "edge-1" in stale.by_id("sessions"), "the last good page is kept"


# ------------------------------------------------- a remote console, logged into

CDP_TIMEOUT_S = 30.0


class Cdp:
    """The few DevTools protocol calls the test needs, over one page's websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.last_id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.last_id += 1
        await self.ws.send_json({"id": self.last_id, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.ws.receive_json(), CDP_TIMEOUT_S)
            if message.get("id") == self.last_id:
                assert "error" not in message, message
                return dict(message["result"])

    async def value(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    async def until(self, expression: str) -> None:
        deadline = time.monotonic() + CDP_TIMEOUT_S
        while not await self.value(expression):
            assert time.monotonic() < deadline, f"never true: {expression}"
            await asyncio.sleep(0.1)


def _devtools_page(profile: Path, process: subprocess.Popen[str]) -> str:
    """The websocket URL of the page Chromium opened (DevToolsActivePort names its port)."""
    deadline = time.monotonic() + CDP_TIMEOUT_S
    port_file = profile / "DevToolsActivePort"
    while not port_file.exists():
        assert process.poll() is None and time.monotonic() < deadline, "Chromium did not start"
        time.sleep(0.1)
    port = port_file.read_text().split()[0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
        targets = json.loads(answer.read())
    return next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")


async def _log_in_and_out(ws_url: str, url: str, token: str, shot: Path) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(ws_url, max_msg_size=64 * 1024 * 1024) as ws,
    ):
        cdp = Cdp(ws)
        await cdp.call("Page.navigate", url=url)
        await cdp.until("document.getElementById('login') !== null")
        seen: dict[str, Any] = {"before": await cdp.value("document.body.innerText")}
        await cdp.value(
            f"document.getElementById('token').value = {json.dumps(token)}; "
            "document.getElementById('login-submit').click(); true"
        )
        await cdp.until(
            "location.pathname === '/' && document.getElementById('runs-by-state') !== null"
        )
        seen["sessions"] = await cdp.value("document.getElementById('sessions').innerText")
        seen["document_cookie"] = await cdp.value("document.cookie")
        seen["cookies"] = (await cdp.call("Network.getCookies", urls=[url]))["cookies"]
        shot.write_bytes(base64.b64decode((await cdp.call("Page.captureScreenshot"))["data"]))
        await cdp.call("Page.navigate", url=f"{url}workers")
        await cdp.until("document.getElementById('workers') !== null")
        seen["workers"] = await cdp.value("document.getElementById('workers').innerText")
        await cdp.value("document.getElementById('logout-submit').click(); true")
        await cdp.until(
            "location.pathname === '/login' && document.getElementById('login') !== null"
        )
        await cdp.call("Page.navigate", url=url)
        await cdp.until(
            "document.readyState === 'complete' && document.getElementById('login') !== null"
        )
        seen["after"] = await cdp.value("document.body.innerText")
        return seen


@pytest.fixture
def remote_console(
    db_dsn: str, pg_cluster, db_name: str, tmp_path: Path
) -> Iterator[tuple[Scenario, str, RemoteFiles]]:
    files = remote_files(tmp_path / "remote")
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        scenario = build_scenario(conn)
        try:
            with console_process(
                readonly_dsn(conn, pg_cluster, db_name), *remote_args(files)
            ) as url:
                yield scenario, url, files
        finally:
            drop_role(conn, db_name)


def test_log_in_to_a_remote_console_in_a_browser(
    remote_console: tuple[Scenario, str, RemoteFiles], tmp_path: Path
) -> None:
    """Chromium (the dev CA's certificate accepted with --ignore-certificate-errors)
    gets the login form, logs in with the token, sees the overview and the
    workers, and after logging out gets the form again."""
    _, url, files = remote_console
    assert url.startswith("https://localhost:")
    profile = tmp_path / "profile-remote"
    browser = subprocess.Popen(
        [
            chromium(),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--ignore-certificate-errors",
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        seen = asyncio.run(
            _log_in_and_out(
                _devtools_page(profile, browser), url, files.token, tmp_path / "remote-overview.png"
            )
        )
    finally:
        stop_process(browser)
    assert "log in with the console's access token" in seen["before"]
    assert "edge-1" not in seen["before"]
    assert "edge-1" in seen["sessions"] and "gpu-box" in seen["sessions"]
    assert seen["document_cookie"] == "", "the session cookie is readable by scripts"
    (cookie,) = [c for c in seen["cookies"] if c["name"] == SESSION_COOKIE]
    assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert files.token not in cookie["value"]
    assert "edge-1" in seen["workers"] and "retired" in seen["workers"]
    assert "edge-1" not in seen["after"] and "Access token" in seen["after"]
    assert (tmp_path / "remote-overview.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------- the live log of a running attempt

LOG_DEADLINE_S = 5.0


def _headless(profile: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            chromium(),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


async def _watch_live_log(ws_url: str, page_url: str, live: Any) -> dict[str, Any]:
    """Open the run page, then write to the log and end the attempt while it is open."""
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(ws_url, max_msg_size=64 * 1024 * 1024) as ws,
    ):
        cdp = Cdp(ws)
        await cdp.call("Page.navigate", url=page_url)
        await cdp.until("document.getElementById('log') !== null")
        seen: dict[str, Any] = {
            "first": await cdp.value("document.getElementById('log').textContent")
        }
        # A page that reloads loses this; one that updates in place keeps it.
        await cdp.value("window.__sameDocument = 'yes'; true")
        written = time.monotonic()
        live.append("step 2 <script>alert(3)</script>\n")
        await cdp.until("document.getElementById('log').textContent.includes('step 2')")
        seen["after_s"] = time.monotonic() - written
        seen["same_document"] = await cdp.value("window.__sameDocument")
        seen["scripts_in_log"] = await cdp.value(
            "document.querySelectorAll('#log script, #log *').length"
        )
        await asyncio.sleep(2.5)  # a page refresh (2 s) in between keeps the live section
        live.append("step 3\n")
        await cdp.until("document.getElementById('log').textContent.includes('step 3')")
        seen["trailer_while_running"] = await cdp.value(
            "document.getElementById('log-trailer').hidden"
        )
        live.complete(live.stored + 100)
        await cdp.until(
            "document.getElementById('log').getAttribute('data-follow') === 'false'"
            " && !document.getElementById('log-trailer').hidden"
        )
        seen["text"] = await cdp.value("document.getElementById('log').textContent")
        seen["trailer"] = await cdp.value("document.getElementById('log-trailer').textContent")
        seen["same_document_at_end"] = await cdp.value("window.__sameDocument")
        # Loaded anew, the server renders the whole log (escaped) and the trailer.
        await cdp.call("Page.navigate", url=page_url)
        await cdp.until("document.readyState === 'complete' && !window.__sameDocument")
        seen["rendered"] = await cdp.value("document.getElementById('log').textContent")
        seen["rendered_markup"] = await cdp.value("document.querySelectorAll('#log *').length")
        seen["rendered_trailer"] = await cdp.value(
            "document.getElementById('log-trailer').textContent"
        )
        return seen


@pytest.mark.parametrize("refresh_s", ["0", "2"])
def test_a_running_attempts_log_grows_on_the_page_without_reload(
    db_dsn: str, pg_cluster, db_name: str, tmp_path: Path, refresh_s: str
) -> None:
    """With the page's own refresh off (0) only the log's follower can show the new
    lines; with it on (2 s) the refresh and the follower together show each line once."""
    from tests.py.log_support import start_attempt

    with psycopg.connect(db_dsn, autocommit=True) as conn:
        live = start_attempt(conn)
        live.append("step 1\n")
        try:
            with console_process(
                readonly_dsn(conn, pg_cluster, db_name), "--refresh-s", refresh_s
            ) as url:
                profile = tmp_path / "profile-log"
                browser = _headless(profile)
                try:
                    seen = asyncio.run(
                        _watch_live_log(
                            _devtools_page(profile, browser), f"{url}runs/{live.run_id}", live
                        )
                    )
                finally:
                    stop_process(browser)
                endpoint = urllib.request.urlopen(
                    f"{url}runs/{live.run_id}/log?attempt=1&offset=7", timeout=10
                )
                page = json.loads(endpoint.read())
        finally:
            drop_role(conn, db_name)
    assert seen["first"] == "step 1\n"
    assert seen["after_s"] <= LOG_DEADLINE_S
    assert seen["same_document"] == "yes" and seen["same_document_at_end"] == "yes", (
        "the page reloaded"
    )
    assert seen["scripts_in_log"] == 0, "the log's text became markup"
    assert seen["trailer_while_running"] is True
    text = "step 1\nstep 2 <script>alert(3)</script>\nstep 3\n"
    assert seen["text"] == text
    assert (seen["rendered"], seen["rendered_markup"]) == (text, 0)
    stored = len(text.encode())
    assert seen["trailer"] == f"[qinglong: log incomplete: {stored} of {stored + 100} bytes stored]"
    assert page["text"] == text[7:] and page["nextOffset"] == stored and page["ended"] is True
    assert page["trailer"] == seen["trailer"] == seen["rendered_trailer"]
