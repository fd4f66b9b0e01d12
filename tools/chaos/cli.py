"""Handlers of `python -m tools.chaos soak` and `… check` (parsers: __main__.py)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tools.chaos.checker import KNOWN_ISSUES, RESULT_FILE, Report, check_dir


def _fmt(counts: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                     for k, v in counts.items())  # fmt: skip


def summary(report: Report, result: dict[str, Any] | None = None) -> list[str]:
    lines = []
    if result is not None:
        lines.append(
            f"pulls: {result.get('pulls', 0):,} (target {result.get('minPulls', 0):,};"
            f" {_fmt(result.get('pullResults', {}))})"
        )
        if result.get("crashWindows"):
            lines.append(f"crash windows hit: {_fmt(result['crashWindows'])}")
        if result.get("crashWindowsMissed"):
            lines.append(f"CRASH WINDOWS NOT HIT: {', '.join(result['crashWindowsMissed'])}")
        if result.get("unexpectedExits"):
            lines.append(f"unexpected exits: {result['unexpectedExits']}")
    lines.append(f"faults: {_fmt(report.faults)}")
    lines.append(f"checked: {_fmt(report.counts)}")
    lines.append(f"anomalies: {_fmt(report.by_class())}")
    doc = report.to_doc()
    for name, details in doc["details"].items():
        lines.extend(f"  {name}: {detail}" for detail in details)
    if doc["excused"]:
        lines.append(f"excused ({sum(doc['excused'].values()):,} failures, each by a fact):")
        lines.extend(f"  {count:,} x {key}" for key, count in doc["excused"].items())
    for key, details in doc["knownIssues"].items():
        lines.append(
            f"KNOWN ISSUE {key} x{len(details)} (not counted; --strict counts it): "
            f"{KNOWN_ISSUES[key]}"
        )
        lines.extend(f"  {detail}" for detail in details[:20])
    lines.append("result: " + ("OK, no anomalies" if report.ok else
                               f"{len(report.anomalies)} ANOMALIES"))  # fmt: skip
    return lines


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every `finally` stops what the soak started."""

    def handler(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def soak_command(args: argparse.Namespace) -> int:
    from tools.chaos.soak import PLANS, Soak, SoakError

    plan = PLANS[args.plan]
    overrides = {"seed": args.seed, "duration_s": args.duration, "min_pulls": args.min_pulls}
    plan = dataclasses.replace(plan, **{k: v for k, v in overrides.items() if v is not None})
    if plan.duration_s > plan.max_duration_s:
        plan = dataclasses.replace(plan, max_duration_s=plan.duration_s * 1.5)
    out = args.out or Path(tempfile.mkdtemp(prefix="qinglong-chaos-"))
    soak = Soak(plan, out.absolute(), say=lambda text: print(text, flush=True), strict=args.strict)
    print(f"chaos soak ({plan.name}), seed {soak.seed}, out {out}", flush=True)
    try:
        with _sigterm_as_interrupt():
            report = soak.run()
    except SoakError as exc:
        print(f"soak failed: {exc}", file=sys.stderr)
        return 2
    result = _result(out)
    for line in summary(report, result):
        print(line)
    enough = (report.pulls or 0) >= plan.min_pulls
    if not enough:
        print(f"too few pulls: {report.pulls} < {plan.min_pulls}")
    covered = not soak.missed_windows()
    return 0 if report.ok and enough and covered else 1


def _result(out: Path) -> dict[str, Any] | None:
    import json

    with contextlib.suppress(OSError, ValueError):
        return json.loads((out / RESULT_FILE).read_text(encoding="utf-8"))
    return None


def check_command(args: argparse.Namespace) -> int:
    history_dir: Path = args.history_dir
    try:
        report = check_dir(history_dir, strict=args.strict)
    except (OSError, ValueError, KeyError) as exc:
        print(f"cannot check {history_dir}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for line in summary(report, _result(history_dir)):
        print(line)
    return 0 if report.ok else 1


def mutate_command(args: argparse.Namespace) -> int:
    import time

    from tools.chaos.mutate import MutantError, check_applies, load_mutants, run_mutants

    try:
        mutants = load_mutants(only=args.only)
        for mutant in mutants:
            check_applies(mutant)
    except MutantError as exc:
        print(f"mutate failed: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for mutant in mutants:
            print(f"{mutant.name}: applies — {mutant.rationale} [{mutant.guarantee}]")
        return 0
    soak_args = ["--short"]
    for flag, value in (("--seed", args.seed), ("--duration", args.duration),
                        ("--min-pulls", args.min_pulls)):  # fmt: skip
        if value is not None:
            soak_args += [flag, str(value)]
    began = time.monotonic()
    try:
        with _sigterm_as_interrupt():
            outcomes = run_mutants(mutants, soak_args=soak_args, keep=args.keep,
                                   say=lambda text: print(text, flush=True))  # fmt: skip
    except MutantError as exc:
        print(f"mutate failed: {exc}", file=sys.stderr)
        return 2
    caught = sum(1 for o in outcomes if o.caught)
    print(f"{caught} of {len(outcomes)} mutants caught in {time.monotonic() - began:.0f}s")
    return 0 if caught == len(outcomes) else 1
