"""`python -m tools.console_screenshot [--out docs/console-overview.png]`: the README's
picture of the console's overview, regenerated.

A throwaway PostgreSQL 15, migrated; the console tests' demo-like scenario
(tests/py/console_scenario.py: workers with live sessions, a disabled worker,
an authentication denial, runs that succeeded, failed, started or still wait);
`qinglong console` as a login role that is only a member of ql_readonly; and a
headless Chromium screenshot (1280 x 1500) of `/` once its script has run.
Everything it starts is stopped and removed before it returns.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "docs" / "console-overview.png"
WINDOW = "1280,1500"
VIRTUAL_TIME_MS = 3000
DATABASE = "ql_console_screenshot"


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("headless Chromium missing: apt-get install chromium")


def screenshot(url: str, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="ql-shot-") as profile:
        subprocess.run(
            [
                chromium(),
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={WINDOW}",
                f"--virtual-time-budget={VIRTUAL_TIME_MS}",
                f"--screenshot={out}",
                url,
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PNG file to write")
    args = parser.parse_args(argv)

    from qinglong.db.migrator import bootstrap, migrate
    from qinglong.throwaway_postgres import ThrowawayPostgres
    from tests.py.console_scenario import build_scenario, console_process, readonly_dsn

    cluster = ThrowawayPostgres()
    cluster.start()
    try:
        dsn = cluster.create_database(DATABASE)
        migrate(dsn)
        bootstrap(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            build_scenario(conn)
            with console_process(readonly_dsn(conn, cluster, DATABASE), "--refresh-s", "2") as url:
                screenshot(url, args.out)
    finally:
        cluster.cleanup()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
