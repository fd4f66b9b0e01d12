"""`python -m tools.bench soak --quick`: the harness works — real ingress and
`worker run --execute` processes complete runs in every interval, dead tuples
are sampled, the last/first ratio is computed, the feeder keeps the depth, the
sweeper prunes with its retention and the stored bytes are sized per interval.
Not the figures: a shared 2-core box makes them noisy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Minutes, not seconds: the full suite runs it; `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow

QUEUE_TABLES = {"runs", "attempts", "run_leases", "events"}
STORED_TABLES = QUEUE_TABLES | {"security_audit"}


@pytest.mark.timeout(150)
def test_quick_soak_harness(tmp_path: Path) -> None:
    report, results = tmp_path / "BENCHMARKS.md", tmp_path / "soak.json"
    cmd = [sys.executable, "-m", "tools.bench", "soak", "--quick",
           "--report", str(report), "--json", str(results)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=140, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    doc = json.loads(results.read_text())
    main, dead_table, stored_table = doc["tables"]
    assert {t["data"]["benchmark"] for t in doc["tables"]} == {"soak"}
    data = main["data"]

    intervals = data["intervals"]
    assert len(intervals) == len(main["rows"]) == 4
    for interval in intervals:
        assert interval["completed"] > 0, interval
        assert interval["pulls"] > 0 and interval["pullP50Ms"] is not None, interval
        assert interval["depthEnd"] > 0.9 * data["depth"], interval  # the feeder kept up
    assert data["lastFirstRatio"] is not None and data["lastFirstRatio"] > 0
    assert isinstance(data["ratioMet"], bool) and isinstance(data["deadMet"], bool)
    assert data["fed"] > 0 and data["depthStart"] >= 0.9 * data["depth"]

    dead = data["dead"]
    assert len(dead["samples"]) >= 8  # every 2 s over 20 s
    assert all(set(s["dead"]) == QUEUE_TABLES for s in dead["samples"])
    assert dead["max"] >= dead["final"] >= 0
    assert {row[0] for row in dead_table["rows"]} == {f"ql_private.{t}" for t in QUEUE_TABLES}

    # Retention (--quick: 5 s) prunes during the window, and the tally of completions
    # survives it (counted as they happen, not from events the sweeper deleted).
    assert data["retainRunsS"] == 5 and data["sweeps"].get("pruned.runs", 0) > 0
    assert all(set(i["storedBytes"]) == STORED_TABLES for i in intervals)
    assert len(stored_table["rows"]) == 5  # the window's start + 4 intervals
    assert data["steadyFrom"] is not None and data["growth"] is not None
    assert isinstance(data["growthMet"], bool)

    notes = " ".join(main["notes"])
    assert "target ≥ 0.9" in notes and "target ≤ 10,000" in notes and "target ≤ 1.1" in notes
    text = report.read_text()
    assert "Command: `python -m tools.bench soak --quick" in text and "**soak:" in text
