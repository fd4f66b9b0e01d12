"""`python -m tools.chaos mutate`: can the soak fail? Plant bugs and see.

Each mutant is a small patch of the product (tools/chaos/mutants/NN-name.patch),
a plausible bug against one guarantee. Its header, before the diff, says why::

    Rationale: <one line: what the bug is>
    Guarantee: <the guarantee it breaks>
    Expect: <the anomaly class expected to catch it> [or <another one>]

For each mutant: the checkout (tracked and untracked, not ignored files) is
copied to a temporary directory, the patch applied there with `git apply`
(checked first for every mutant: one that no longer applies fails the command,
it is not skipped), and the short soak runs against that copy — the copy's
`qinglong/` folder is made the whole package (its subpackage folders linked in,
as pyproject's package-dir maps them) and put first on PYTHONPATH, and the
command verifies that the copy, not the checkout, is what gets imported. A mutant is caught when the
soak's checker reports at least one anomaly; the report names the anomaly
that caught it and whether it is of the expected class. The command prints
`K of N mutants caught` and exits 0 only when every mutant was caught.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MUTANTS_DIR = Path(__file__).resolve().parent / "mutants"
REPO = Path(__file__).resolve().parents[2]
CHECK_FILE = "check.json"  # tools/chaos/soak.py
SOAK_TIMEOUT_S = 1200
HEADER_KEYS = ("Rationale", "Guarantee", "Expect")

__all__ = ["Mutant", "MutantError", "Outcome", "load_mutants", "run_mutants"]


class MutantError(Exception):
    """A mutant is malformed or no longer applies: the command fails."""


@dataclass(frozen=True)
class Mutant:
    name: str
    path: Path
    rationale: str
    guarantee: str
    expect: str

    @property
    def expected_classes(self) -> tuple[str, ...]:
        """`Expect: f_journal_invalid or e_unresolved_intent`: either shows the bug."""
        return tuple(part.strip() for part in self.expect.split(" or "))

    @classmethod
    def load(cls, path: Path) -> Mutant:
        text = path.read_text(encoding="utf-8")
        head = text.split("\ndiff --git ", 1)[0]
        fields: dict[str, str] = {}
        for line in head.splitlines():
            key, sep, value = line.partition(":")
            if sep and key in HEADER_KEYS:
                fields[key] = value.strip()
        missing = [k for k in HEADER_KEYS if not fields.get(k)]
        if missing or "\ndiff --git " not in text:
            raise MutantError(
                f"{path.name}: header needs {', '.join(HEADER_KEYS)} lines "
                f"before the diff (missing: {', '.join(missing) or 'the diff'})"
            )
        return cls(path.stem, path, fields["Rationale"], fields["Guarantee"], fields["Expect"])


@dataclass
class Outcome:
    mutant: Mutant
    caught: bool
    anomalies: dict[str, int] = field(default_factory=dict)
    first: str | None = None  # one anomaly that caught it: "class: detail"
    seconds: float = 0.0
    exit_code: int | None = None

    @property
    def expected(self) -> bool:
        return any(self.anomalies.get(name, 0) > 0 for name in self.mutant.expected_classes)

    def line(self) -> str:
        if not self.caught:
            return (
                f"{self.mutant.name}: NOT CAUGHT (soak exit {self.exit_code}, "
                f"{self.seconds:.0f}s) — {self.mutant.rationale}"
            )
        found = ", ".join(f"{k} {v}" for k, v in self.anomalies.items() if v)
        note = "" if self.expected else f" (expected {self.mutant.expect})"
        return f"{self.mutant.name}: caught by {found}{note} in {self.seconds:.0f}s — {self.first}"


def load_mutants(directory: Path = MUTANTS_DIR, only: list[str] | None = None) -> list[Mutant]:
    mutants = [Mutant.load(p) for p in sorted(directory.glob("*.patch"))]
    if only:
        unknown = set(only) - {m.name for m in mutants}
        if unknown:
            raise MutantError(f"no such mutant: {', '.join(sorted(unknown))}")
        mutants = [m for m in mutants if m.name in only]
    if not mutants:
        raise MutantError(f"no mutants under {directory}")
    return mutants


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


def check_applies(mutant: Mutant, tree: Path = REPO) -> None:
    """`git apply --check` against `tree`: read-only, fails loudly."""
    done = _git(["apply", "--check", str(mutant.path)], tree)
    if done.returncode != 0:
        raise MutantError(f"{mutant.name} no longer applies: {done.stderr.strip()}")


def copy_checkout(dest: Path, source: Path = REPO) -> None:
    """Tracked and untracked (not ignored) files of the checkout, modes kept."""
    listed = _git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], source)
    if listed.returncode != 0:
        raise MutantError(f"git ls-files failed: {listed.stderr.strip()}")
    for rel in filter(None, listed.stdout.split("\0")):
        src = source / rel
        if not src.is_file():
            continue  # deleted in the working tree
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)


def package_root(tree: Path) -> None:
    """Make the copy's `qinglong/` folder the whole package, as pyproject's package-dir
    maps it (subpackage folders linked in), so the copy shadows the editable install."""
    doc = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = doc["tool"]["setuptools"]["package-dir"]
    top = tree / mapping["qinglong"]
    for package, folder in mapping.items():
        if package != "qinglong":
            link = top / package.removeprefix("qinglong.")
            if link.exists():
                raise MutantError(f"{link} exists: cannot lay out the package")
            link.symlink_to(tree / folder, target_is_directory=True)


def isolated_env(tree: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    probe = subprocess.run(
        [sys.executable, "-c", "import qinglong.worker.coordinator as c, qinglong.db as d,"
         " tools.chaos as t; print(c.__file__); print(d.__file__); print(t.__file__)"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    paths = probe.stdout.split()
    if (
        probe.returncode != 0
        or len(paths) != 3
        or not all(Path(p).is_relative_to(tree) for p in paths)
    ):
        raise MutantError(f"the copy is not what gets imported: {probe.stdout} {probe.stderr}")
    return env


def run_one(mutant: Mutant, work: Path, soak_args: list[str],
            say: Callable[[str], None]) -> Outcome:  # fmt: skip
    tree, out = work / "tree", work / "soak"
    for stale in (tree, out):
        shutil.rmtree(stale, ignore_errors=True)
    copy_checkout(tree)
    check_applies(mutant, tree)
    applied = _git(["apply", str(mutant.path)], tree)
    if applied.returncode != 0:
        raise MutantError(f"{mutant.name} did not apply: {applied.stderr.strip()}")
    package_root(tree)
    env = isolated_env(tree)
    began = time.monotonic()
    say(f"{mutant.name}: soak running ({mutant.rationale})")
    with open(work / "soak.log", "w", encoding="utf-8") as log:
        try:
            done = subprocess.run(
                [sys.executable, "-m", "tools.chaos", "soak", "--out", str(out), *soak_args],
                cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT,
                timeout=SOAK_TIMEOUT_S, check=False)  # fmt: skip
            code: int | None = done.returncode
        except subprocess.TimeoutExpired:
            code = None
    outcome = Outcome(mutant, caught=False, seconds=time.monotonic() - began, exit_code=code)
    check = out / CHECK_FILE
    if check.exists():
        doc = json.loads(check.read_text(encoding="utf-8"))
        outcome.anomalies = {k: int(v) for k, v in doc.get("anomalies", {}).items()}
        outcome.caught = any(outcome.anomalies.values())
        for name, details in doc.get("details", {}).items():
            if details and (outcome.first is None or name in mutant.expected_classes):
                outcome.first = f"{name}: {details[0]}"
    return outcome


def run_mutants(mutants: list[Mutant], *, soak_args: list[str], keep: Path | None,
                say: Callable[[str], None] = print) -> list[Outcome]:  # fmt: skip
    for mutant in mutants:  # every patch must apply before any soak runs
        check_applies(mutant)
    outcomes: list[Outcome] = []
    for mutant in mutants:
        work = (keep / mutant.name) if keep else Path(tempfile.mkdtemp(prefix="ql-mutant-"))
        work.mkdir(parents=True, exist_ok=True)
        try:
            outcome = run_one(mutant, work, soak_args, say)
        finally:
            if keep is None:
                shutil.rmtree(work, ignore_errors=True)
        say(outcome.line())
        outcomes.append(outcome)
    return outcomes
