"""Secrets never in argv, files others can read, reprs or logs.

`qinglong dev up` (real cluster + ingress): scram-sha-256 on TCP for every role
(generated passwords), peer on the unix socket; the passwords sit only in 0600
files (dev-env.json, ingress.json) and no process's command line — sampled from
/proc/*/cmdline all through `up`, an admin command, and `down` — ever shows one.
The demo does the same with its own cluster. Reprs of the objects holding a DSN
leave it out.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from qinglong.demo import Demo
from qinglong.dev_cli import public_env
from qinglong.service.config import load_config
from qinglong.throwaway_postgres import Auth, ThrowawayPostgres
from tests.py.dsn_files import dsn_file

QL = [sys.executable, "-m", "qinglong"]
SECRET = "s3cr3t-Pa55word-for-repr"
DSN = f"host=127.0.0.1 port=5432 dbname=q user=qinglong_ingress password={SECRET}"


# ------------------------------------------------------------------ cmdlines


class CmdlineWatch:
    """Samples every process's command line (what `ps -ef` shows) until stopped."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.seen: set[str] = set()
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                    raw = handle.read()
            except OSError:
                continue  # exited meanwhile
            if raw:
                self.seen.add(raw.replace(b"\0", b" ").decode(errors="replace").strip())

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self._interval_s)

    @contextmanager
    def running(self) -> Iterator[CmdlineWatch]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(10)
            self._sample()

    def leaks(self, secrets: list[str]) -> list[str]:
        """Command lines holding one of `secrets`, or any of ours naming a password."""
        return [
            line
            for line in self.seen
            if any(s in line for s in secrets)
            or ("qinglong" in line and "password=" in line.lower())
        ]

    def saw(self, *fragments: str) -> bool:
        """A command line holding every fragment."""
        return any(all(f in line for f in fragments) for line in self.seen)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _password(dsn: str) -> str:
    password = conninfo_to_dict(dsn).get("password")
    assert isinstance(password, str) and len(password) >= 32, "a generated password"
    return password


def _without_password(dsn: str, password: str | None = None) -> str:
    params = {k: v for k, v in conninfo_to_dict(dsn).items() if k != "password"}
    if password is not None:
        params["password"] = password
    return make_conninfo(**params)


def _ql(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*QL, *args], capture_output=True, text=True, timeout=timeout, check=False, env=env
    )


# ------------------------------------------------------------------ reprs


def test_ingress_config_repr_leaves_out_the_dsn(tmp_path: Path) -> None:
    path = tmp_path / "ingress.json"
    path.write_text(
        json.dumps({"dsn": DSN, "certFile": "c.pem", "keyFile": "k.pem", "clientCaFile": "ca.pem"})
    )
    config = load_config(path, environ={})
    assert config.dsn == DSN  # still there for the pool ...
    for text in (repr(config), str(config), f"{config!r}"):
        assert SECRET not in text and "dsn" not in text  # ... but never printed
        assert "cert_file=" in text  # the rest of the repr is intact


@pytest.mark.parametrize(
    "dsn",
    [
        DSN,
        f"postgresql://qinglong_ingress:{SECRET}@127.0.0.1:5432/q?connect_timeout=10",
        f"postgresql://qinglong_ingress@127.0.0.1:5432/q?password={SECRET}&sslmode=disable",
        f"host=127.0.0.1 password='{SECRET} x\\'y' user=qinglong_ingress dbname=q",
    ],
)
def test_dev_up_prints_dsns_without_their_password(dsn: str, tmp_path: Path) -> None:
    env = {
        "dsn": dsn,
        "runtimeDsn": dsn,
        "ingressUrl": "https://127.0.0.1:1",
        "worker": {"workerId": "w"},
    }
    shown = public_env(env, tmp_path / "dev-env.json")
    assert SECRET not in json.dumps(shown)
    assert shown["envFile"] == str(tmp_path / "dev-env.json")
    assert {k: v for k, v in shown.items() if k not in ("dsn", "runtimeDsn", "envFile")} == {
        k: v for k, v in env.items() if k not in ("dsn", "runtimeDsn")
    }
    expected = {k: v for k, v in conninfo_to_dict(dsn).items() if k != "password"}
    assert conninfo_to_dict(shown["dsn"]) == conninfo_to_dict(shown["runtimeDsn"]) == expected
    assert expected["user"] == "qinglong_ingress"  # the rest of the DSN survives
    assert env["dsn"] == dsn  # the caller's (written) description is untouched


def test_cluster_and_demo_reprs_leave_out_passwords_and_dsns() -> None:
    cluster = ThrowawayPostgres(auth=Auth.SCRAM, existing_dsn=DSN, passwords={"postgres": SECRET})
    assert SECRET not in repr(cluster) and "auth=<Auth.SCRAM" in repr(cluster)
    demo = Demo(workers=1, runs=1, dsn=DSN, timeout_s=1.0, keep=None)
    try:
        demo.admin_dsn = demo.ingress_dsn = DSN
        assert SECRET not in repr(demo) and "workers=1" in repr(demo)
    finally:
        os.rmdir(demo.root / "logs")
        os.rmdir(demo.root)


# ------------------------------------------------------------------ dev up


def _dev_secrets(state_dir: Path) -> tuple[dict, list[str]]:
    env = json.loads((state_dir / "dev-env.json").read_text())
    ingress = json.loads((state_dir / "ingress.json").read_text())
    return env, [_password(env["dsn"]), _password(env["runtimeDsn"]), _password(ingress["dsn"])]


def _assert_scram_enforced(env: dict) -> None:
    for dsn in (env["dsn"], env["runtimeDsn"]):
        password = _password(dsn)
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        for wrong in (None, password[::-1]):
            with pytest.raises(psycopg.OperationalError):
                psycopg.connect(_without_password(dsn, wrong), connect_timeout=5).close()
    with psycopg.connect(env["dsn"]) as conn:
        rules = conn.execute("SELECT type, auth_method FROM pg_hba_file_rules").fetchall()
        verifiers = conn.execute(
            "SELECT rolname FROM pg_authid WHERE rolpassword LIKE 'SCRAM-SHA-256$%'"
        ).fetchall()
    assert rules and {method for kind, method in rules if kind != "local"} == {"scram-sha-256"}
    assert {method for kind, method in rules if kind == "local"} == {"peer"}
    assert {"qinglong_ingress", "qinglong_runtime"} <= {name for (name,) in verifiers}


def test_dev_up_keeps_passwords_in_0600_files_and_off_every_command_line(tmp_path: Path) -> None:
    state_dir = tmp_path / "dev"
    watch = CmdlineWatch()
    with watch.running():
        up = _ql("dev", "up", "--state-dir", str(state_dir))
        try:
            assert up.returncode == 0, up.stderr
            env, secrets = _dev_secrets(state_dir)
            # stdout/stderr reach terminals and CI logs: DSNs there carry no password.
            assert [s for s in secrets if s in up.stdout or s in up.stderr] == []
            assert json.loads(up.stdout)["envFile"] == str((state_dir / "dev-env.json").resolve())
            for name in ("dev-env.json", "ingress.json", "dev-state.json"):
                assert _mode(state_dir / name) == 0o600, name
            _assert_scram_enforced(env)
            pg_dir = Path(json.loads((state_dir / "dev-state.json").read_text())["pgBaseDir"])
            assert not (pg_dir / "initdb.pwfile").exists(), "initdb's password file is gone"
            pg_log = (pg_dir / "postgres.log").read_text(errors="replace")
            assert [s for s in secrets if s in pg_log] == [], "a password in the server log"
            # An operator command with the superuser DSN, passed the documented ways.
            by_file = dsn_file(tmp_path, "admin.dsn", env["dsn"])
            listed = _ql("admin", "worker", "list", "--dsn-file", by_file, timeout=60)
            assert listed.returncode == 0, listed.stderr
            by_env = _ql(
                "status", "--json", timeout=60, env=os.environ | {"QINGLONG_DSN": env["runtimeDsn"]}
            )
            assert by_env.returncode == 0, by_env.stderr
        finally:
            down = _ql("dev", "down", "--state-dir", str(state_dir), timeout=120)
    assert down.returncode == 0, down.stderr
    state_text = "".join(
        p.read_text(errors="replace") for p in [*state_dir.joinpath("logs").iterdir()]
    )
    assert [s for s in secrets if s in state_text] == [], "a password in a log"
    # The sampler really saw the processes `up` started and the commands we ran.
    assert watch.saw("ingress serve", "--config") and watch.saw("--dsn-file")
    assert watch.saw("postgres") and watch.saw("dev down")
    assert watch.leaks(secrets) == []


# ------------------------------------------------------------------ demo


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_demo_keeps_its_passwords_off_every_command_line(tmp_path: Path) -> None:
    watch = CmdlineWatch(interval_s=0.01)
    with watch.running():
        result = _ql(
            "demo",
            "--workers",
            "1",
            "--runs",
            "2",
            "--no-crash",
            "--timeout",
            "20",
            "--keep",
            str(tmp_path),
            timeout=150,
        )
    # Whether every run finished is test_demo's business; here: it ran and stopped.
    assert re.search(
        r"stopped workers, ingress, sweeper(, producer API)? and PostgreSQL", result.stdout
    ), result.stdout + result.stderr
    (root,) = tmp_path.glob("qinglong-demo-*")
    config = root / "ingress.json"
    assert _mode(config) == 0o600
    dsn = json.loads(config.read_text())["dsn"]
    if os.environ.get("QL_TEST_DSN"):
        pytest.skip("QL_TEST_DSN: the demo used an existing server's DSN")
    secret = _password(dsn)
    assert secret not in "".join(
        p.read_text(errors="replace") for p in (root / "logs").iterdir() if p.is_file()
    )
    assert watch.saw("ingress serve", "--config") and watch.saw("worker run --config")
    assert watch.leaks([secret]) == []
