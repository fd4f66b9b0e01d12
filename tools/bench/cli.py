"""`python -m tools.bench [sql|idle|depth|classes|ops|e2e|edge|fleet|soak|logs] [--quick]`: run
and report.

One throwaway PostgreSQL cluster serves every database benchmark of the
invocation (each measurement gets a fresh clone of a migrated template); `e2e`,
`edge`, `fleet`, `soak` and `logs` start their own processes (e2e, soak and logs their own cluster:
soak's autovacuum must see only its own tables' churn). Each sub-benchmark
prints its tables; at the end a dated section — machine (nproc, RAM, CPU),
PostgreSQL version and key settings, the load average before and after (the
machine may be shared), the exact command — is appended to docs/BENCHMARKS-HISTORY.md
(or --report FILE; '-' = none).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from tools.bench.common import BenchContext, Table, machine_info, pg_settings, prepare_context

ORDER = ("sql", "idle", "depth", "classes", "ops", "e2e", "edge", "fleet", "soak", "logs")
# A bare `python -m tools.bench` runs these; classes, the fleet, the soak and logs only
# when named.
DEFAULT = ("sql", "idle", "depth", "ops", "e2e", "edge")
NEEDS_DB = frozenset({"sql", "idle", "depth", "classes", "ops"})
DEFAULT_REPORT = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS-HISTORY.md"


def _selected(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)} (choose from {ORDER})")
    return [n for n in ORDER if n in names] if names else list(DEFAULT)


def _clean(value: Any) -> Any:
    """JSON-safe: NaN -> None, recursively."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _section(
    command: str,
    machine: dict[str, Any],
    settings: dict[str, str],
    load_after: str,
    tables: list[Table],
    note: str,
) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## {stamp} — {'quick' if '--quick' in command else 'full'} run",
        "",
        f"Command: `{command}`",
        "",
    ]
    lines.append(
        f"Machine: {machine.get('nproc')} CPUs (nproc), {machine.get('ramGiB')} GiB RAM, "
        f"{machine.get('cpu', 'unknown CPU')}, {machine.get('arch')}, Linux "
        f"{machine.get('kernel')}, Python {machine.get('python')}."
    )
    if settings:
        version = settings.pop("server_version", "?")
        pairs = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))
        lines.append(f"PostgreSQL {version} (throwaway cluster): {pairs}.")
    lines.append(
        f"Load average before: {machine.get('loadavg')}; after: {load_after}"
        " (1/5/15 min; anything above ~0 is other work on the machine)."
    )
    if note:
        lines.append(note)
    lines.append("")
    for table in tables:
        lines.append(table.markdown())
    return "\n".join(lines).rstrip() + "\n\n"


def _append(path: Path, text: str) -> None:
    if not path.exists():
        path.write_text(
            "# Benchmarks\n\nSections appended by `python -m tools.bench`.\n\n", encoding="utf-8"
        )
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def standalone_options(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Keyword arguments of the standalone benchmarks' `run_standalone`, by name."""
    from qinglong.durations import parse_duration_s

    def seconds(text: str | None) -> int | None:
        return None if text is None else parse_duration_s(text)

    soak = {"retain_runs_s": seconds(getattr(args, "retain_runs", None)),
            "retain_audit_s": seconds(getattr(args, "retain_audit", None)),
            "intervals": getattr(args, "soak_intervals", None)}  # fmt: skip
    return {"soak": {k: v for k, v in soak.items() if v is not None}}


def run_benchmarks(names: list[str], quick: bool,
                   options: dict[str, dict[str, Any]] | None = None,
                   ) -> tuple[list[Table], dict[str, str]]:  # fmt: skip
    tables: list[Table] = []
    settings: dict[str, str] = {}
    ctx: BenchContext | None = None
    try:
        if NEEDS_DB & set(names):
            ctx = prepare_context(quick)
            settings = pg_settings(ctx.cluster.dsn(ctx.template))
        for name in names:
            module = importlib.import_module(f"tools.bench.{name}")
            started = time.monotonic()
            produced = (
                module.run(ctx)
                if name in NEEDS_DB
                else module.run_standalone(quick, **(options or {}).get(name, {}))
            )
            for table in produced:
                table.data.setdefault("benchmark", name)
                table.data["elapsedS"] = round(time.monotonic() - started, 1)
                print(table.text(), flush=True)
                print(flush=True)
            tables.extend(produced)
    finally:
        if ctx is not None:
            ctx.cluster.cleanup()
    return tables, settings


def bench_command(args: argparse.Namespace) -> int:
    names = _selected(list(args.which))
    machine = machine_info()
    if sys.argv[0].endswith(("tools/bench/__main__.py", "-m")):
        command = " ".join(["python -m tools.bench", *(shlex.quote(a) for a in sys.argv[1:])])
    else:  # called in-process (tests)
        command = " ".join(["python -m tools.bench", *names, *(["--quick"] if args.quick else [])])
    tables, settings = run_benchmarks(names, args.quick, standalone_options(args))
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if str(args.report) != "-":
        report = args.report or DEFAULT_REPORT
        _append(report, _section(command, machine, dict(settings), load_after, tables, args.note))
        print(f"appended to {report}")
    if args.json is not None:
        doc = {"command": command, "machine": machine, "postgres": settings,
               "loadAfter": load_after, "tables": [
                   {"title": t.title, "headers": t.headers, "rows": t.rows, "notes": t.notes,
                    "data": t.data} for t in tables]}  # fmt: skip
        args.json.write_text(json.dumps(_clean(doc), indent=2), encoding="utf-8")
    return 0
