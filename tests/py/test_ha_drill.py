"""The availability drill (SPEC §17.3, docs/RELIABILITY.md), black-box: run
`python -m tools.chaos drill` and hold its last line to the spec's figures.

etcd, two Patroni-managed PostgreSQL 15 nodes (synchronous_mode_strict) and HAProxy
in front of two ingresses, from Debian packages (scripts/test.sh installs them; the
drill installs them itself when missing); about 80-120 s on 2 cores. It ignores
QL_TEST_DSN (its database is its own Patroni cluster). QL_SKIP_HA_DRILL=1 skips it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TARGETS_S = {"failover": 30.0, "switchover": 5.0, "ingress_loss": 5.0}


def _processes_naming(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found


def _db_trouble(out: Path) -> list[str]:
    """The PostgreSQL/Patroni log lines that say why a standby or primary was late."""
    lines = []
    for log in sorted((out / "logs").glob("pg*-patroni.log")):
        lines += [
            f"{log.name}: {line}"
            for line in log.read_text(errors="replace").splitlines()
            if "FATAL" in line or "ERROR" in line or "WARNING" in line
        ]
    return lines[-40:]


@pytest.mark.timeout(420)
@pytest.mark.skipif(bool(os.environ.get("QL_SKIP_HA_DRILL")), reason="QL_SKIP_HA_DRILL set")
def test_drill_failover_switchover_ingress_loss(tmp_path: Path) -> None:
    out = Path(os.environ.get("QL_CHAOS_OUT") or tmp_path) / "drill"
    env = {k: v for k, v in os.environ.items() if k != "QL_TEST_DSN"}
    done = subprocess.run(
        [sys.executable, "-m", "tools.chaos", "drill", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
        check=False,
    )
    print(done.stdout[-6000:], done.stderr[-4000:], f"out: {out}")  # shown on failure
    last = done.stdout.strip().splitlines()[-1]
    figures = json.loads(last)
    assert list(figures) == ["faults", "lostClaims", "doubleLeases", "nonTerminalRuns", "anomalies"]
    assert [f["kind"] for f in figures["faults"]] == list(TARGETS_S)
    for fault in figures["faults"]:
        assert fault["timeToOfferS"] is not None, fault
        assert 0 <= fault["timeToOfferS"] <= TARGETS_S[fault["kind"]], (fault, _db_trouble(out))
    assert figures["lostClaims"] == 0
    assert figures["doubleLeases"] == 0
    assert figures["nonTerminalRuns"] == 0
    assert figures["anomalies"] == 0
    assert done.returncode == 0
    assert "result: OK, no anomalies" in done.stdout
    # The checker saw real work under the faults, and the faults in the history.
    check = json.loads((out / "check.json").read_text())
    assert check["counts"]["leases"] > 20 and check["counts"]["execCompleted"] > 20, check
    assert check["faults"]["kill_ingress"] == 1
    # Everything it started is gone (etcd, Patroni, PostgreSQL, HAProxy, ingresses).
    ha_root = json.loads((out / "drill.json").read_text())["haRoot"]
    assert not Path(ha_root).exists()
    assert _processes_naming(ha_root) == []
    assert _processes_naming(str(out)) == []
