"""`python -m tools.bench fleet --quick`: the idle-fleet harness works end to end —
separate driver processes open real TLS sessions with their own certificates, every
pull in the window is answered idle, and the ingress's CPU, database statements and
WAL over the window are measured, next to the floor server's CPU for the same fleet.
Not the figures (docs/BENCHMARKS.md has those)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_quick_fleet_harness(tmp_path: Path) -> None:
    results = tmp_path / "bench.json"
    cmd = [
        sys.executable,
        "-m",
        "tools.bench",
        "fleet",
        "--quick",
        "--report",
        "-",
        "--json",
        str(results),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=280, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (table,) = json.loads(results.read_text())["tables"]
    (fleet,) = table["data"]["fleets"]
    assert fleet["workers"] == 100 and fleet["sessionsOpened"] == 100 and fleet["errors"] == 0
    # Idle workers at the default cadence (2 s + up to 1 s): every pull idle.
    assert set(fleet["statuses"]) == {"idle"} and fleet["pulls"] > 0
    assert 100 / 3.0 * 0.5 < fleet["pullsPerS"] < 100 / 2.0 * 1.5, fleet["pullsPerS"]
    assert fleet["ingressCpuMsPerPull"] > 0 and not math.isnan(fleet["pgStatementsPerPull"])
    assert fleet["walBytes"] >= 0 and fleet["clientP99Ms"] >= fleet["clientP50Ms"] > 0
    assert sum(1 for n in table["notes"] if n.startswith("target ")) == 2
    # The floor: the same drivers against a bare aiohttp app on the same TLS context.
    (floor,) = table["data"]["floors"]
    assert floor["workers"] == 100 and floor["errors"] == 0
    assert 100 / 3.0 * 0.5 < floor["pullsPerS"] < 100 / 2.0 * 1.5, floor["pullsPerS"]
    assert floor["cpuMsPerPull"] > 0 and floor["clientP99Ms"] >= floor["clientP50Ms"] > 0
    assert any(n.startswith("floor rows:") for n in table["notes"])
