"""qinglong.demo_job without a database: the demo's leak check really looks (it
names where the secret's value is), and its log follower prints whole lines
from pages that cut them anywhere, and the rest once the attempt ended."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from qinglong.demo_job import VALUE_PREFIX, DemoJob, LogFollower
from qinglong.log_text import LogPage


def _job(tmp_path: Path) -> tuple[DemoJob, Path, io.StringIO]:
    root = tmp_path / "work"
    root.mkdir()
    job = DemoJob.create(root)
    job.enabled = True
    out = io.StringIO()
    job.record(out)
    return job, root, out


def test_the_value_is_random_recognisable_and_not_in_the_repr(tmp_path: Path) -> None:
    job, root, _ = _job(tmp_path)
    other = DemoJob.create(tmp_path)
    assert job.value.startswith(VALUE_PREFIX.encode()) and job.value != other.value
    assert VALUE_PREFIX not in repr(job)
    assert (root / "kek.key").stat().st_mode & 0o777 == 0o600
    jwks = json.loads((root / "trust-keys.json").read_text())
    assert [k["kid"] for k in jwks["keys"]] == [job.trust.signer.kid]


def test_the_leak_check_finds_nothing_in_clean_output_and_files(tmp_path: Path) -> None:
    job, _root, _ = _job(tmp_path)
    runs = tmp_path / "runs"
    (runs / "w1").mkdir(parents=True)
    (runs / "w1" / "output.log").write_text("token=[MASKED]\n")
    assert job.recorder is not None
    job.recorder.write("  log | token=[MASKED]\n")
    job.check("unused: no run followed", runs)
    assert job.findings == [] and not job.leaked
    assert job.scanned_files >= 4  # kek, signing key, jwk, jwks, output.log
    assert any("secret value found nowhere" in line for line in job.summary_lines())


def test_the_leak_check_names_each_place_holding_the_value(tmp_path: Path) -> None:
    job, _root, _ = _job(tmp_path)
    runs = tmp_path / "runs"
    (runs / "w1").mkdir(parents=True)
    leaked = runs / "w1" / "output.log"
    leaked.write_bytes(b"chunk before " + job.value + b" after")
    assert job.recorder is not None
    job.recorder.write("token=" + job.value.decode() + "\n")
    job.check("unused: no run followed", runs)
    assert job.leaked and job.findings == ["the demo's output", str(leaked)]
    assert any(
        line.startswith("  secret value FOUND in: the demo's output, ")
        for line in job.summary_lines()
    )


def _pages(text: str, cuts: list[int], ended_after: int) -> Any:
    """fetch(run, attempt, offset) over `text` stored in pieces up to each cut."""
    state = {"calls": 0}

    def fetch(run: str, attempt: int | None, offset: int) -> LogPage:
        stored = cuts[min(state["calls"], len(cuts) - 1)]
        state["calls"] += 1
        data = text.encode()[:stored]
        return LogPage.from_json(
            {
                "runId": run,
                "attemptNumber": 1,
                "offset": offset,
                "text": data[offset:].decode(),
                "storedBytes": stored,
                "logBytes": None,
                "truncated": False,
                "complete": False,
                "ended": state["calls"] > ended_after,
            }
        )

    return fetch


def test_the_follower_prints_whole_lines_and_the_rest_at_the_end() -> None:
    text = "first line\nsecond [MASKED] line\nlast without newline"
    fetch = _pages(text, [0, 6, 30, len(text.encode())], ended_after=3)
    follower = LogFollower("r1")
    seen = [follower.read(fetch) for _ in range(4)]
    assert seen == [[], [], ["first line"], ["second [MASKED] line", "last without newline"]]
    assert follower.finished and follower.text == text
