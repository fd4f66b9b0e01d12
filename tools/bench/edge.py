"""`bench edge`: what the worker costs a small device.

* steady-state RSS of an idle polling worker: `qinglong dev up` (PostgreSQL +
  ingress), then `qinglong worker run --dev-env … --journal …` polling an empty
  queue; VmRSS sampled from /proc every 0.5 s over the idle period, which starts
  at the worker's first answered pull (session open, TLS, first idle answer all
  done). The steady state is the median of the second half of the samples (by
  then the worker has polled every ~2.5 s and heartbeated its session); the
  largest sample and VmHWM (the peak, start-up included) are reported too, so a
  figure that only holds between pulls would show. docs/EDGE.md breaks it down.
  Measured twice against the same ingress: with this interpreter as installed
  here, and with a clean interpreter (a venv seeing the same packages without
  this machine's site hooks — see _clean_interpreter); the target is judged on
  the clean one, and both figures, plus each bare interpreter, are reported;
* time to first pull: process start to the worker's first `claim.idle` event
  (interpreter start, imports, config, TLS context, journal lock, session
  open, the first pull's answer), and the import time alone of the modules a
  run loads (`python -c "import qinglong.worker.runner, …"`, best of 3, minus a bare
  interpreter);
* install closure of the base + worker extra: the files of jsonschema and its
  dependencies (recursively, no extras), semver and rfc8785 as their installed
  distributions' RECORD lists them (sizes from disk, byte-compiled caches
  included when present), plus our `worker` and `schemas` packages.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from tools.bench.common import Table

ROOT_DISTS = ("jsonschema", "semver", "rfc8785")
OUR_PACKAGES = ("qinglong.worker", "qinglong.schemas")
RUN_IMPORTS = ", ".join(
    f"qinglong.{m}"
    for m in (
        "worker.cli",
        "worker.runner",
        "worker.transport",
        "worker.offer_validation",
        "worker.journal",
        "schemas.contract",
    )
)
_NAME = re.compile(r"^[A-Za-z0-9._-]+")
RSS_TARGET_KIB = 24 * 1024


def _python(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - started


def import_time() -> dict[str, float]:
    bare = min(_python("pass") for _ in range(3))
    loaded = min(_python(f"import {RUN_IMPORTS}") for _ in range(3))
    return {"bareInterpreterMs": bare * 1000, "withImportsMs": loaded * 1000,
            "importsMs": (loaded - bare) * 1000}  # fmt: skip


def _requirements(dist: metadata.Distribution) -> list[str]:
    names = []
    for line in dist.requires or []:
        requirement, _, marker = line.partition(";")
        if "extra" in marker:
            continue  # an optional extra's dependency: not installed by the base
        match = _NAME.match(requirement.strip())
        if match:
            names.append(match.group(0))
    return names


def _dist_files(dist: metadata.Distribution) -> tuple[int, int]:
    size = files = 0
    for entry in dist.files or []:
        path = Path(str(dist.locate_file(entry)))
        with contextlib.suppress(OSError):
            size += path.stat().st_size
            files += 1
    return files, size


def closure() -> list[dict[str, Any]]:
    """One row per distribution of the closure, then our packages."""
    seen: dict[str, dict[str, Any]] = {}
    todo = list(ROOT_DISTS)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            seen[key] = {"name": name, "version": "missing", "files": 0, "bytes": 0}
            continue
        files, size = _dist_files(dist)
        seen[key] = {"name": dist.metadata["Name"], "version": dist.version, "files": files,
                     "bytes": size}  # fmt: skip
        todo.extend(_requirements(dist))
    rows = sorted(seen.values(), key=lambda r: -r["bytes"])
    for package in OUR_PACKAGES:
        module = importlib.import_module(package)
        base = Path(module.__file__).parent
        paths = [p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        rows.append({"name": f"{package}/ (ours)", "version": "-", "files": len(paths),
                     "bytes": sum(p.stat().st_size for p in paths)})  # fmt: skip
    return rows


def _rss_kib(pid: int) -> tuple[int, int]:
    fields: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0])
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


def _first_idle(process: subprocess.Popen[bytes], started_ms: float, timeout_s: float) -> float:
    """Milliseconds from spawn to the first claim.idle event on stderr."""
    assert process.stderr is not None
    deadline = time.monotonic() + timeout_s
    os.set_blocking(process.stderr.fileno(), True)
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if isinstance(doc, dict) and doc.get("event") == "claim.idle":
                return float(doc["ts"]) - started_ms
    raise RuntimeError("the worker never reported an idle pull")


def idle_worker(idle_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="qinglong-bench-edge-") as tmp:
        state = Path(tmp) / "dev"
        qinglong = [sys.executable, "-m", "qinglong"]
        subprocess.run([*qinglong, "dev", "up", "--state-dir", str(state)], check=True,
                       capture_output=True, timeout=120)  # fmt: skip
        try:
            here = _measure_worker(qinglong, state, Path(tmp) / "journal", idle_s)
            clean_python = _clean_interpreter(Path(tmp) / "venv")
            # From tmp, not the checkout: `-m` puts the working directory first on
            # sys.path, and the clean run must import the unpacked wheel.
            clean = _measure_worker(
                [str(clean_python), "-m", "qinglong"],
                state,
                Path(tmp) / "journal-clean",
                idle_s,
                cwd=Path(tmp),
            )
            here["bareKiB"] = _bare_rss_kib(sys.executable)
            clean["bareKiB"] = _bare_rss_kib(str(clean_python))
        finally:
            subprocess.run([*qinglong, "dev", "down", "--state-dir", str(state)],
                           capture_output=True, timeout=120, check=False)  # fmt: skip
    return dict(here, clean=clean)


def _clean_interpreter(venv: Path) -> Path:
    """A venv of this Python that sees the same installed dependencies — this
    interpreter's site-packages as plain sys.path entries — plus QingLong as its
    wheel installs it (built from this checkout and unpacked), without running
    this machine's site hooks. Here those hooks (a sandbox's certifi
    CA-injection .pth, an editable-install finder) import certifi,
    importlib.resources, zipfile, tempfile … into every process, ~5 MiB of RSS a
    router's clean install does not have."""
    import site
    import zipfile

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    python = venv / "bin" / "python"
    done = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                          check=True, capture_output=True, text=True, timeout=60)  # fmt: skip
    wheels, installed = venv / "wheel", venv / "qinglong-wheel"
    # Built from a copy: a checkout's stale build/lib must not leak into the wheel.
    source = venv / "source"
    shutil.copytree(
        Path(__file__).resolve().parents[2],
        source,
        ignore=shutil.ignore_patterns(
            ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
        ),
    )
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "--disable-pip-version-check", "-w", str(wheels), str(source)],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    (wheel,) = wheels.glob("qinglong_dispatch-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(installed)
    paths = [str(installed), *site.getsitepackages()]
    Path(done.stdout.strip(), "qinglong-paths.pth").write_text("\n".join(paths) + "\n")
    return python


def _bare_rss_kib(python: str) -> int:
    code = (
        "for line in open('/proc/self/status'):\n"
        "    if line.startswith('VmRSS'): print(line.split()[1])"
    )
    done = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    return int(done.stdout.strip())


def _measure_worker(qinglong: list[str], state: Path, journal: Path,
                    idle_s: float, cwd: Path | None = None) -> dict[str, Any]:  # fmt: skip
    started_ms = time.time() * 1000
    process = subprocess.Popen(
        [*qinglong, "worker", "run", "--dev-env", str(state / "dev-env.json"),
         "--journal", str(journal)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True, cwd=cwd,
    )  # fmt: skip
    try:
        first_ms = _first_idle(process, started_ms, 60.0)
        # The rest of stderr is not read from here on: keep it from filling the pipe.
        assert process.stderr is not None
        process.stderr.close()
        samples = []
        deadline = time.monotonic() + idle_s
        while time.monotonic() < deadline:
            samples.append(_rss_kib(process.pid))
            time.sleep(0.5)
        if process.poll() is not None:
            raise RuntimeError(f"the idle worker exited ({process.returncode})")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
    if len(samples) < 4:
        raise RuntimeError("too few RSS samples for a steady state")
    steady = statistics.median(s[0] for s in samples[len(samples) // 2 :])
    return {"firstPullMs": first_ms, "rssKiB": steady, "rssMaxKiB": max(s[0] for s in samples),
            "hwmKiB": max(s[1] for s in samples), "samples": len(samples),
            "idleS": idle_s}  # fmt: skip


def run_standalone(quick: bool) -> list[Table]:
    worker = idle_worker(6.0 if quick else 30.0)
    clean = worker["clean"]
    imports = import_time()
    rows = closure()
    total_files = sum(r["files"] for r in rows)
    total_bytes = sum(r["bytes"] for r in rows)
    table = Table("edge: the worker on a small device", ["measure", "value"])
    table.rows = [
        [f"idle polling worker RSS (steady, {worker['idleS']:.0f} s idle)",
         f"{worker['rssKiB'] / 1024:.1f} MiB"],
        ["idle polling worker largest RSS sample while idle",
         f"{worker['rssMaxKiB'] / 1024:.1f} MiB"],
        ["idle polling worker peak RSS (VmHWM)", f"{worker['hwmKiB'] / 1024:.1f} MiB"],
        ["same, clean interpreter (no site hooks): steady RSS",
         f"{clean['rssKiB'] / 1024:.1f} MiB (peak {clean['hwmKiB'] / 1024:.1f} MiB)"],
        ["bare interpreter RSS: here / clean",
         f"{worker['bareKiB'] / 1024:.1f} / {clean['bareKiB'] / 1024:.1f} MiB"],
        ["the worker's own RSS above its bare interpreter: here / clean",
         f"{(worker['rssKiB'] - worker['bareKiB']) / 1024:.1f} / "
         f"{(clean['rssKiB'] - clean['bareKiB']) / 1024:.1f} MiB"],
        ["process start to first pull answered", f"{worker['firstPullMs']:.0f} ms"],
        ["import time of the run path (minus bare interpreter)",
         f"{imports['importsMs']:.0f} ms (interpreter alone "
         f"{imports['bareInterpreterMs']:.0f} ms)"],
        ["install closure (base + worker extra)",
         f"{total_files:,} files, {total_bytes / 1024 / 1024:.2f} MiB"],
    ]  # fmt: skip
    closure_table = Table(
        "edge: install closure by distribution", ["distribution", "version", "files", "KiB"]
    )
    closure_table.rows = [[r["name"], r["version"], f"{r['files']:,}", f"{r['bytes'] / 1024:,.0f}"]
                          for r in rows]  # fmt: skip
    closure_table.notes.append(
        "sizes are the installed files on this machine (RECORD entries, byte-code caches "
        "included where Python already wrote them); a fresh install is smaller until first import"
    )
    met = "met" if clean["rssKiB"] <= RSS_TARGET_KIB else "MISSED"
    table.notes.append(
        f"target: idle worker RSS <= {RSS_TARGET_KIB // 1024} MiB on a clean install: {met} "
        f"({clean['rssKiB'] / 1024:.1f} MiB). The 'here' figures include this machine's "
        "site hooks, which a router does not run; both are shown, never only the smaller"
    )
    table.data = {"worker": worker, "imports": imports, "closure": rows,
                  "closureFiles": total_files, "closureBytes": total_bytes}  # fmt: skip
    return [table, closure_table]
