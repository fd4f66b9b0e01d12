"""`python -m tools.bench … --quick` (what CI runs): the harness works — every table is
produced, ratios are computed, an idle pull writes no WAL, and a dated section
with the machine and the command is appended to the report. Not the figures."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

# Minutes, not seconds: the full suite runs it; `pytest -m "not slow"` skips it.
pytestmark = pytest.mark.slow


@pytest.mark.timeout(480)
def test_quick_bench_harness(tmp_path: Path) -> None:
    report, results = tmp_path / "BENCHMARKS.md", tmp_path / "bench.json"
    cmd = [
        sys.executable,
        "-m",
        "tools.bench",
        "sql",
        "idle",
        "depth",
        "ops",
        "e2e",
        "edge",
        "--quick",
        "--report",
        str(report),
        "--json",
        str(results),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=460, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    doc = json.loads(results.read_text())
    tables = {t["data"]["benchmark"]: t for t in reversed(doc["tables"])}
    assert set(tables) == {"sql", "idle", "depth", "ops", "e2e", "edge"}
    for table in doc["tables"]:
        assert table["rows"], table["title"]

    sql = tables["sql"]["data"]
    assert [lv["threads"] for lv in sql["levels"]] == [1, 8, 32]
    for level in sql["levels"]:
        assert level["ours"]["count"] > 0 and level["raw"]["count"] > 0
        assert level["ratio"] is not None and level["ratio"] > 0
        assert level["ours"]["count"] == level["runs"] == level["raw"]["count"]
        # The schema floor drained its own fresh runs, side by side with the raw claim.
        assert level["floor"]["count"] == level["runs"]
        assert level["floorRatio"] is not None and level["floorRatio"] > 0

    idle = tables["idle"]["data"]
    assert idle["walBytesPerIdlePull"] == 0, idle["walTries"]
    assert idle["roundTripsPerIdlePull"] == 1
    assert idle["idleVsClaim"] is not None and idle["idleVsClaim"] > 0
    assert idle["drain"]["ratioMean"] is not None and idle["drain"]["ratioMean"] > 0
    fleet = next(t["data"]["fleet"] for t in doc["tables"] if "fleet" in t["data"])
    assert fleet["workers"] == 300 and fleet["errors"] == 0 and fleet["nonIdlePulls"] == 0
    assert fleet["pullsPerS"] > 50 and fleet["shortcutRatio"] > 0.3
    # Counted at the gateway and by pg_stat_statements: the two agree, and the idle
    # view + heartbeat batching keep the fleet well below one call per pull.
    assert fleet["dbCallsPerS"] < 0.75 * fleet["pullsPerS"]
    assert abs(fleet["pgStatementsPerS"] - fleet["dbCallsPerS"]) <= 0.25 * fleet["dbCallsPerS"] + 2
    assert fleet["cpuSecondsPerS"] > 0

    depth = tables["depth"]["data"]["cases"]
    assert len(depth) == 5
    assert depth[0]["claimsRatio"] == 1.0
    assert all(c["p50Ratio"] is not None and not math.isnan(c["p50Ratio"]) for c in depth)
    assert depth[1]["outcomes"].get("offered", 0) >= 0.9 * tables["depth"]["data"]["pulls"]
    # runs due in an hour are not offered; the ready runs behind them are
    assert depth[2]["outcomes"].get("offered", 0) >= 0.9 * tables["depth"]["data"]["pulls"]
    # the blocked head is jumped over: the matching runs behind it are claimed
    assert depth[3]["outcomes"].get("offered", 0) >= 0.9 * tables["depth"]["data"]["pulls"]
    # 1,000 pools, the workers granted one: its runs are claimed (SPEC 13.3)
    assert depth[4]["outcomes"].get("offered", 0) >= 0.9 * tables["depth"]["data"]["pulls"]

    ops_tables = [t for t in doc["tables"] if t["data"]["benchmark"] == "ops"]
    assert len(ops_tables) == 4
    reads, pages, prune, busy = (t["data"] for t in ops_tables)
    assert reads["runs"] == 20_000 and sum(reads["stored"].values()) == 20_000
    functions = {r["function"] for r in reads["reads"]}
    assert functions == {"list_runs", "show_run", "list_workers", "task_settings"}
    for read in reads["reads"]:
        assert read["returned"] > 0 and read["p99Ms"] > 0 and isinstance(read["met"], bool)
    assert sum(1 for r in reads["reads"] if r["function"] == "list_runs") == 6
    # the busy window really was busy, and the overview was timed in it
    assert busy["leasesInWindow"] > 0 and busy["finishedInWindow"] > 0
    assert busy["pageP99Ms"] > 0 and isinstance(busy["met"], bool)
    # every console page was served and timed (server time from Server-Timing)
    assert {p["path"].split("?")[0] for p in pages["pages"]} >= {"/", "/runs", "/workers"}
    for page in pages["pages"]:
        assert page["serverP99Ms"] > 0 and page["bytes"] > 0 and isinstance(page["met"], bool)
    assert all(rate > 0 for rate in prune["rates"]) and prune["ratio"] is not None
    assert isinstance(prune["met"], bool) and prune["deleted"]["runs"] > 0
    # retention never takes a claimed (live) run, nor offers one twice
    assert prune["noneLost"], prune["check"]

    e2e = tables["e2e"]["data"]
    (level,) = e2e["levels"]
    assert level["workers"] == 8 and level["ours"]["offers"] == 160
    # One call per database-path request; the idle view answers some idle pulls with
    # none and adds its own probes/pings (a few per second per replica).
    assert level["ours"]["perS"] > 0 and 0 < level["ours"]["dbCallsPerRequest"] <= 1.05
    if e2e["pgqueuer"]:  # only when PgQueuer happens to be installed (--quick never installs)
        assert level["pgqueuer"]["jobs"] == 160 and level["ratio"] > 0
        assert level["pgqueuer"]["batchSize"] == 10 and level["pgqueuerOne"]["batchSize"] == 1
        assert level["pgqueuerOne"]["jobs"] == 160 and level["ratioOne"] > 0
    # The raw SKIP LOCKED claim at as many clients, on the same cluster.
    assert level["raw"]["clients"] == 8 and level["raw"]["count"] == 600
    assert level["rawRatio"] is not None and level["rawRatio"] > 0
    # Half load: fed at 50 % of the burst's offers/s, measured from the ingresses' /metrics.
    steady = e2e["steady"]
    assert steady["workers"] == 8 and steady["fedRuns"] > 0 and steady["windowOffers"] > 0
    assert abs(steady["ratePerS"] - 0.5 * level["ours"]["perS"]) < 1e-6
    assert steady["pulls"] > 0 and steady["pullP99Ms"] is not None and steady["pullP99Ms"] > 0
    assert steady["inboxP99Ms"] is not None and steady["inboxP99Ms"] > 0
    # Workers keep their connections: in steady state (almost) no full TLS handshake.
    assert steady["requests"] > 0 and 0 <= steady["handshakeFraction"] <= 1
    assert level["ours"]["tlsHandshakes"] >= 8  # one per worker at least, counted at all
    # Every issue-7 target is judged, met or not.
    assert len(e2e["targets"]) == 5 and all(isinstance(t["met"], bool) for t in e2e["targets"])
    assert sum(1 for n in tables["e2e"]["notes"] if n.startswith("target ")) == 3
    # Server CPU per delivered offer from /proc (ingress trees + PostgreSQL), with each
    # ingress at --processes 1 and 2, next to PostgreSQL's CPU per raw claim.
    cpu = next(t["data"] for t in doc["tables"] if "runs" in t["data"] and "target" in t["data"])
    assert [(r["workers"], r["processes"]) for r in cpu["runs"]] == [(8, 1), (8, 2)]
    for run in cpu["runs"]:
        assert run["offers"] == 160 and run["ingressCpuMsPerOffer"] > 0
        assert run["pgCpuMsPerOffer"] > 0
        assert run["serverCpuMsPerOffer"] == pytest.approx(
            run["ingressCpuMsPerOffer"] + run["pgCpuMsPerOffer"]
        )
        # The clients' side as well: the whole box's CPU per job (workers + server).
        assert run["workerCpuMsPerOffer"] > 0
        assert run["boxCpuMsPerOffer"] == pytest.approx(
            run["serverCpuMsPerOffer"] + run["workerCpuMsPerOffer"]
        )
    box = next(t for t in doc["tables"] if "box" in t["data"])
    assert [(r["workers"], r["system"]) for r in box["data"]["box"]][:2] == [
        (8, "ours"),
        (8, "oursTwo"),
    ]
    assert [row[1] for row in box["rows"]] == [
        "ours, --processes 1",
        "ours, --processes 2",
        "ours: the claim journal alone (floor)",
        "PgQueuer x1",
        "PgQueuer x10",
    ]
    # The journal floor: the worker's mandated file operations, entries of the size ours
    # wrote, one process per worker — real files, so real CPU (fsync is system time).
    (floor,) = box["data"]["journalFloor"]
    assert floor["workers"] == 8 and floor["offers"] == 160
    assert floor["entryBytes"] == level["ours"]["inboxEntryBytes"] > 1000
    assert floor["perS"] > 0 and floor["sysMsPerOffer"] > 0
    assert floor["cpuMsPerOffer"] == pytest.approx(floor["userMsPerOffer"] + floor["sysMsPerOffer"])
    for run in box["data"]["box"][2:]:  # PgQueuer, when it is installed here
        assert run["consumerCpuMsPerJob"] > 0 and run["pgCpuMsPerJob"] > 0
        assert run["boxCpuMsPerJob"] == pytest.approx(
            run["consumerCpuMsPerJob"] + run["pgCpuMsPerJob"]
        )
    assert level["raw"]["pgCpuMsPerClaim"] > 0 and isinstance(cpu["target"]["met"], bool)

    edge = tables["edge"]["data"]
    assert edge["worker"]["rssKiB"] > 0 and edge["worker"]["firstPullMs"] > 0
    assert edge["closureFiles"] > 0 and edge["closureBytes"] > 0
    assert {r["name"] for r in edge["closure"]} >= {"jsonschema", "semver", "rfc8785"}

    text = report.read_text()
    assert text.count("\n## ") == 1
    assert "— quick run" in text
    assert "Machine: " in text and "PostgreSQL 15" in text and "Load average before" in text
    assert "Command: `python -m tools.bench sql idle depth ops e2e edge --quick" in text
    for title in (
        "**sql:",
        "**idle:",
        "**depth:",
        "**ops: operator reads",
        "**ops: console pages",
        "**ops: the console in a busy window",
        "**ops: claims/s",
        "**edge:",
        "**e2e",
        "**e2e: server CPU per delivered offer",
    ):
        assert title in text
