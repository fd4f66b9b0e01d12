"""`python -m tools.bench logs --quick`: the harness works — streamers ship
their live logs (about one chunk every 2 s each) only in the streaming
phases, every log request is answered 200, the streams run throughout, the
claimers claim in every phase and the ratio is computed. Not the figures: a
shared 2-core box makes 4 s phases noisy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Minutes, not seconds: the full suite runs it; `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow


@pytest.mark.timeout(200)
def test_quick_logs_harness(tmp_path: Path) -> None:
    results = tmp_path / "logs.json"
    cmd = [sys.executable, "-m", "tools.bench", "logs", "--quick", "--report", "-",
           "--json", str(results)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=190, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    [table] = json.loads(results.read_text())["tables"]
    data = table["data"]
    assert data["benchmark"] == "logs" and data["order"] == "SLLS"
    streamers = data["streamers"]
    for phase in data["phases"]:
        assert phase["claims"] > 0, phase
        assert phase["streaming"] == streamers, phase  # no stream ended or was lost
        assert phase["logRefused"] == 0, phase
        if phase["kind"] == "S":
            assert phase["logRequests"] == 0, phase  # silent output: nothing to ship
        else:
            # One chunk every 2 s per streamer (SPEC 15.1), within the box's jitter.
            per_s = phase["logRequests"] / phase["seconds"]
            assert 0.5 * streamers / 2 <= per_s <= 1.5 * streamers / 2, phase
    assert data["ratio"] > 0 and data["silentPerS"] > 0
