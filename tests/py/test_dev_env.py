"""`qinglong dev up|down` black-box: a real cluster + ingress, then nothing left behind."""

from __future__ import annotations

import json
import os
import socket
import ssl
import stat
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from qinglong.db import api

ENV_KEYS = {
    "dsn",
    "runtimeDsn",
    "ingressUrl",
    "adminUrl",
    "caFile",
    "caDir",
    "kekFile",
    "worker",
    "api",
}
WORKER_KEYS = {"workerId", "certFile", "keyFile", "credentialFile"}


def dev(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", "dev", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return False
    return fields[0] != "Z"  # a zombie awaiting its reaper is not running


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def _wait_gone(pids: list[int], ports: list[int], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(map(_alive, pids)) and not any(map(_listening, ports)):
            return
        time.sleep(0.1)
    assert [p for p in pids if _alive(p)] == []
    assert [p for p in ports if _listening(p)] == []


def _tls_handshake(env: dict) -> None:
    worker = env["worker"]
    context = ssl.create_default_context(cafile=env["caFile"])
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.load_cert_chain(worker["certFile"], worker["keyFile"])
    with (
        socket.create_connection(("127.0.0.1", _port(env["ingressUrl"])), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() == "TLSv1.3"


def _expired_offer_is_swept_without_a_sweep_call(dsn: str) -> None:
    """The sweeper `up` started is at work: an offer aged past its expiry is
    released `expired` (and its run re-queued) while nobody calls sweep."""
    from tests.py.provision import Intent, Provisioner

    with psycopg.connect(dsn, autocommit=True) as conn:
        prov = Provisioner(conn)
        prov.enqueue(prov.task("swept"))
        offer = prov.pull(prov.session(prov.worker("sweep-probe")), Intent())
        assert offer["status"] == "offered", offer
        run_id = offer["offer"]["candidate"]["runId"]
        conn.execute(
            "UPDATE ql_private.run_leases SET expires_at = clock_timestamp()"
            " - interval '1 second' WHERE run_id = %s",
            (run_id,),
        )
        deadline = time.monotonic() + 20
        row = None
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT l.release_reason, r.state FROM ql_private.run_leases l"
                " JOIN ql_private.runs r ON r.id = l.run_id WHERE l.run_id = %s",
                (run_id,),
            ).fetchone()
            if row == ("expired", "queued"):
                return
            time.sleep(0.2)
        raise AssertionError(f"the expired offer was not swept: {row}")


def _sweeper_login_can_sweep_only(dsn: str) -> None:
    """The sweeper `up` started holds a login that is a member of ql_sweeper
    only (SPEC §13.6): it sweeps, but cannot publish or enqueue."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        member_of = conn.execute(
            "SELECT array_agg(b.rolname::text ORDER BY b.rolname) FROM pg_auth_members m"
            " JOIN pg_roles b ON b.oid = m.roleid WHERE m.member = current_user::regrole"
        ).fetchone()
        assert member_of == (["ql_sweeper"],)
        assert conn.execute("SELECT current_user").fetchone() == ("qinglong_sweeper",)
        assert api.sweep_leases(batch=1).run(conn).doc["more"] is False
        for call in (
            api.publish_revision(project="p", task="t", canonical=b"{}"),
            api.enqueue_runs(task_id=str(uuid.uuid4()), priority=0, count=1),
        ):
            try:
                call.run(conn)
            except psycopg.errors.InsufficientPrivilege as exc:
                assert exc.sqlstate == "42501"
            else:
                raise AssertionError(f"the sweeper login could run {call.function}")


def _api_token_works(env: dict, state_dir: Path) -> None:
    """SPEC §13.4: `api: {url, caFile, tokenFile}`; the token (project `dev`, every
    scope, 0600) enqueues and reads through the running API, whose login is a
    member of ql_producer only."""
    import requests

    from qinglong.service import control_plane

    section = env["api"]
    assert set(section) == {"url", "caFile", "tokenFile"}
    assert section["url"].startswith("https://127.0.0.1:")
    assert stat.S_IMODE(os.stat(section["tokenFile"]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(state_dir / "api.json").st_mode) == 0o600
    token = Path(section["tokenFile"]).read_text().strip()
    assert token.startswith("qlp_")
    with control_plane.connect(env["runtimeDsn"]) as conn:
        listed = control_plane.run(conn, api.list_project_tokens(project="dev")).doc["tokens"]
        assert [(t["tokenId"], t["state"], t["scopes"]) for t in listed] == [
            (token[4:20], "active", ["cancel", "enqueue", "log", "read", "retry"])
        ]
    with psycopg.connect(env["dsn"]) as conn:
        api_login = json.loads((state_dir / "api.json").read_text())["dsn"]
        user = conninfo_to_dict(api_login)["user"]
        groups = conn.execute(
            "SELECT array_agg(b.rolname::text) FROM pg_auth_members m"
            " JOIN pg_roles r ON r.oid = m.member"
            " JOIN pg_roles b ON b.oid = m.roleid"
            " WHERE r.rolname = %s",
            (user,),
        ).fetchone()
        assert groups == (["ql_producer"],)
        command = {"schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 5}
        control_plane.publish_task(conn, "dev", "hello", _canonical(command))
    headers = {"Authorization": f"Bearer {token}"}
    reply = requests.post(
        section["url"] + "/v1/runs",
        headers=headers,
        timeout=10,
        verify=section["caFile"],
        json={"schema": "qinglong/run-enqueue-request@v1", "task": "dev/hello"},
    )
    assert reply.status_code == 201, reply.text
    run_id = reply.json()["runIds"][0]
    shown = requests.get(
        f"{section['url']}/v1/runs/{run_id}", headers=headers, timeout=10, verify=section["caFile"]
    )
    assert shown.status_code == 200 and shown.json()["run"]["runId"] == run_id
    assert token not in (state_dir / "logs" / "api.log").read_text()


def _canonical(command: dict) -> bytes:
    from qinglong.service.compiler import compile_command

    return compile_command(command).canonical


def test_down_on_never_upped_dir_is_a_no_op(tmp_path: Path) -> None:
    for directory in (tmp_path / "never", tmp_path):
        result = dev("down", "--state-dir", str(directory), timeout=60)
        assert result.returncode == 0, result.stderr


def _secret_set_with_the_dev_kek(env: dict) -> None:
    """`admin secret set` takes the dev KEK from $QINGLONG_KEK_FILE (SPEC §14.1)."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "qinglong",
            "admin",
            "secret",
            "set",
            "--dsn",
            env["runtimeDsn"],
            "--project",
            "dev",
            "--name",
            "dev.token",
        ],
        input=b"dev-secret-value",
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "QINGLONG_KEK_FILE": env["kekFile"]},
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["version"] == 1 and b"dev-secret-value" not in result.stdout


def test_dev_up_down(tmp_path: Path) -> None:
    state_dir = tmp_path / "dev"
    up = dev("up", "--state-dir", str(state_dir))
    try:
        assert up.returncode == 0, up.stderr
        env = json.loads((state_dir / "dev-env.json").read_text())
        assert set(env) == ENV_KEYS
        # stdout: the same description, minus the DSNs' passwords, plus where the file is.
        shown = json.loads(up.stdout)
        assert shown.pop("envFile") == str((state_dir / "dev-env.json").resolve())
        assert {k: v for k, v in shown.items() if "Dsn" not in k and k != "dsn"} == {
            k: v for k, v in env.items() if "Dsn" not in k and k != "dsn"
        }
        for key in ("dsn", "runtimeDsn"):
            assert "password" not in shown[key] and "password=" in env[key]
            assert conninfo_to_dict(shown[key]) == {
                k: v for k, v in conninfo_to_dict(env[key]).items() if k != "password"
            }
        assert set(env["worker"]) == WORKER_KEYS
        # Its DSNs carry generated passwords: readable by its owner only.
        assert stat.S_IMODE(os.stat(state_dir / "dev-env.json").st_mode) == 0o600
        for key in ("caFile",):
            assert Path(env[key]).is_file()
        assert Path(env["caDir"]).is_dir()
        # The secrets' key-encryption key (SPEC §14.1): 0600, named by the ingress config too.
        assert stat.S_IMODE(os.stat(env["kekFile"]).st_mode) == 0o600
        ingress_config = json.loads((state_dir / "ingress.json").read_text())
        assert ingress_config["kekFile"] == env["kekFile"]
        for key in ("certFile", "keyFile", "credentialFile"):
            assert Path(env["worker"][key]).is_file()
        assert stat.S_IMODE(os.stat(env["worker"]["credentialFile"]).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(env["worker"]["keyFile"]).st_mode) == 0o600
        assert Path(env["worker"]["credentialFile"]).read_text().startswith("ql3w_")
        assert env["ingressUrl"].startswith("https://127.0.0.1:")
        assert env["adminUrl"].startswith("http://127.0.0.1:")

        with psycopg.connect(env["dsn"]) as conn:
            assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        with psycopg.connect(env["runtimeDsn"]) as conn:
            row = conn.execute(
                "SELECT current_user, pg_has_role('ql_runtime', 'MEMBER')"
            ).fetchone()
            assert row == ("qinglong_runtime", True)
            # The development worker declares its own labels (SPEC §13.2 self-labels).
            from qinglong.db import api

            listed = api.list_workers().run(conn).doc["workers"]
            assert [(w["workerId"], w["selfLabels"]) for w in listed] == [
                (env["worker"]["workerId"], True)
            ]
            # ... and takes every pool, present and future (SPEC §13.1 `--pool '*'`).
            assert [w["allPools"] for w in listed] == [True]
            pg_port = int(conn.info.port)
            postmaster = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert postmaster is not None

        _tls_handshake(env)
        with urllib.request.urlopen(env["adminUrl"] + "/readyz", timeout=5) as response:
            assert response.status == 200

        ingress_pid = int((state_dir / "ingress.pid").read_text())
        sweeper_pid = int((state_dir / "sweeper.pid").read_text())
        api_pid = int((state_dir / "api.pid").read_text())
        state = json.loads((state_dir / "dev-state.json").read_text())
        pids = [ingress_pid, sweeper_pid, api_pid, int(state["pgPid"])]
        _api_token_works(env, state_dir)
        _secret_set_with_the_dev_kek(env)
        assert stat.S_IMODE(os.stat(state_dir / "sweeper.dsn").st_mode) == 0o600
        cmdline = Path(f"/proc/{sweeper_pid}/cmdline").read_bytes().decode()
        assert "password" not in cmdline and "sweep" in cmdline
        _sweeper_login_can_sweep_only((state_dir / "sweeper.dsn").read_text().strip())
        _expired_offer_is_swept_without_a_sweep_call(env["dsn"])
        assert all(map(_alive, pids))
        ports = [
            _port(env["ingressUrl"]),
            _port(env["adminUrl"]),
            _port(env["api"]["url"]),
            pg_port,
        ]

        again = dev("up", "--state-dir", str(state_dir), timeout=60)
        assert again.returncode != 0
        assert json.loads(again.stderr.strip().splitlines()[-1])["reason"] == "already_up"
        assert all(map(_alive, pids)), "a refused second `up` must not disturb the first"
    finally:
        down = dev("down", "--state-dir", str(state_dir), timeout=120)
    assert down.returncode == 0, down.stderr
    _wait_gone(pids, ports)
    assert not (state_dir / "dev-env.json").exists()
    assert not Path(state["pgBaseDir"]).exists()
    second = dev("down", "--state-dir", str(state_dir), timeout=60)
    assert second.returncode == 0, second.stderr
