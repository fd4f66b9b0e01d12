"""The console in a real browser: headless Chromium (Debian's package, which
scripts/test.sh installs when missing) loads each page of a running console
over a demo-like database, and the test reads the DOM Chromium built: the
expected runs, workers and states are there, an output tail holding
`<script>alert(1)</script>` is text (no script element came of it), the page
refreshed itself in place, and a screenshot of each page is saved under the
test's tmp dir; and a refresh that fails shows a "stale since" marker."""

from __future__ import annotations

import http.server
import re
import shutil
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.py.console_scenario import (
    XSS_LABEL,
    XSS_TAIL,
    Scenario,
    build_scenario,
    console_process,
    drop_role,
    readonly_dsn,
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
    raise AssertionError("headless Chromium missing: apt-get install chromium "
                         "(scripts/test.sh does it)")


def _run(profile: Path, *args: str) -> str:
    cmd = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
           "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
           f"--user-data-dir={profile}", f"--virtual-time-budget={VIRTUAL_TIME_MS}", *args]
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
            with console_process(readonly_dsn(conn, pg_cluster, db_name),
                                 "--refresh-s", "2") as url:
                yield scenario, url
        finally:
            drop_role(conn, db_name)


def test_pages_in_a_browser(scenario_console: tuple[Scenario, str], tmp_path: Path) -> None:
    scenario, url = scenario_console

    overview = load(url, tmp_path, "overview.png")
    assert overview.by_id("generated").startswith("read-only")
    counts = {e.attrs["data-state"]: "".join(e.text) for e in overview.elements
              if e.attrs.get("data-state")}
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
    assert [e.attrs.get("src") for e in run.tags("script")] == ["/static/console.js"], \
        "the output tail became a script element"
    assert "succeeded" in run.by_id("run")

    workers = load(f"{url}workers", tmp_path, "workers.png")
    table = workers.by_id("workers")
    assert "edge-1" in table and "gpu-box" in table and "retired" in table
    assert f"note={XSS_LABEL}" in table, "the label value is shown as text"
    assert not workers.tags("img"), "a label value became an element"
    assert "disabled" in table

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


def test_failed_refresh_shows_a_stale_marker(scenario_console: tuple[Scenario, str],
                                             tmp_path: Path) -> None:
    """The page loads, then its refreshes get 503: it keeps the last page and
    shows "stale since HH:MM:SS UTC" (hidden while refreshes succeed)."""
    _, url = scenario_console
    healthy = Dom(_run(tmp_path / "profile-ok", "--dump-dom", url))
    assert healthy.tags("body")[0].attrs.get("data-refreshed")
    marker = [e for e in healthy.elements if e.attrs.get("id") == "stale"]
    assert marker and "hidden" in marker[0].attrs and healthy.by_id("stale") == ""

    handler = type("Handler", (_FailAfterFirstPage,), {"upstream": url.rstrip("/"),
                                                       "pages_served": 0})
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        stale = Dom(_run(tmp_path / "profile-stale", "--dump-dom",
                         f"http://127.0.0.1:{proxy.server_address[1]}/"))
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
