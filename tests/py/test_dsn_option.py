"""`--dsn`, `--dsn-file` and `QINGLONG_DSN`: every database command takes all three."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qinglong.cli import build_parser
from qinglong.dsn_option import DSN_ENV, add_dsn_argument, resolve_dsn


def _parse(argv: list[str], environ: dict[str, str], required: bool = True) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="t")
    add_dsn_argument(parser, required=required)
    args = parser.parse_args(argv)
    resolve_dsn(args, parser, environ)
    return args


def test_flag_wins_over_file_and_environment(tmp_path: Path) -> None:
    assert _parse(["--dsn", "dbname=a"], {DSN_ENV: "dbname=env"}).dsn == "dbname=a"


def test_file_first_line_stripped(tmp_path: Path) -> None:
    path = tmp_path / "dsn"
    path.write_text("  host=/tmp dbname=b password=s3cret  \nignored\n")
    args = _parse(["--dsn-file", str(path)], {DSN_ENV: "dbname=env"})
    assert args.dsn == "host=/tmp dbname=b password=s3cret"


def test_environment_when_no_flag() -> None:
    assert _parse([], {DSN_ENV: " dbname=c "}).dsn == "dbname=c"


def test_optional_dsn_may_be_absent() -> None:
    assert _parse([], {}, required=False).dsn is None


@pytest.mark.parametrize("content", ["", "\n\n", "   \n"])
def test_empty_file_is_a_usage_error(
    tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "dsn"
    path.write_text(content)
    with pytest.raises(SystemExit) as exc:
        _parse(["--dsn-file", str(path)], {DSN_ENV: "dbname=env"})
    assert exc.value.code == 2
    assert "empty" in capsys.readouterr().err


def test_missing_file_and_missing_dsn_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        _parse(["--dsn-file", str(tmp_path / "nope")], {})
    assert exc.value.code == 2
    assert "nope" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        _parse([], {})
    assert exc.value.code == 2
    assert DSN_ENV in capsys.readouterr().err


def test_flag_and_file_are_exclusive(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        _parse(["--dsn", "x", "--dsn-file", str(tmp_path)], {})


@pytest.mark.parametrize(
    "command",
    [
        ["db", "migrate"],
        ["db", "status"],
        ["status"],
        ["runtime", "sweep"],
        ["admin", "run", "list"],
        ["admin", "task", "configure", "--task", "x"],
        ["admin", "prune"],
    ],
)
def test_every_database_command_takes_a_dsn_file(command: list[str], tmp_path: Path) -> None:
    path = tmp_path / "dsn"
    path.write_text("dbname=from_file\n")
    parser = build_parser(command)
    args = parser.parse_args([*command, "--dsn-file", str(path)])
    resolve_dsn(args, parser, {})
    assert args.dsn == "dbname=from_file"


def test_cli_reads_the_environment_in_a_real_process(db_dsn: str) -> None:
    """`qinglong db status` with the DSN only in QINGLONG_DSN talks to the database."""
    env = {**os.environ, DSN_ENV: db_dsn}
    done = subprocess.run(
        [sys.executable, "-m", "qinglong", "db", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "0001_core_schema" in done.stdout
