"""The soak's loopback environment, assembled from the dev env's own helpers.

PostgreSQL, migration, login roles and the dev PKI come from `qinglong.dev_cli`
(the same calls `qinglong dev up` makes); worker identities from
`service.control_plane.provision_worker` (what `admin worker create` calls).
The cluster is always a private one (never `QL_TEST_DSN`): the soak restarts it
with `pg_ctl restart -m immediate`, which a shared server must not suffer.

One knob is turned below the API: the task's `lease_ttl_seconds` (default 60,
range 5..3600) is set to the soak's lease TTL with a superuser UPDATE, so that
unexecuted offers expire and are re-offered many times within a short run.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROJECT = "chaos"
TASK = "soak"
COMMAND: dict[str, Any] = {
    "schema": "qinglong/command@v1", "argv": ["true"], "env": {}, "timeoutS": 60,
}  # fmt: skip

__all__ = ["SoakEnv", "create_env"]


@dataclass
class WorkerIdentity:
    name: str
    worker_id: str
    cert_file: str
    key_file: str
    credential_file: str


@dataclass
class SoakEnv:
    root: Path
    cluster: Any  # qinglong.dev_cli DevPostgres
    dsn: str  # superuser
    ingress_dsn: str
    runtime_dsn: str
    tls: dict[str, str]
    ca_file: Path
    task_id: str = ""
    workers: dict[str, WorkerIdentity] = field(default_factory=dict)

    def restart_postgres(self) -> None:
        self.cluster.restart(mode="immediate")

    def cleanup(self) -> None:
        """Stop the cluster and delete its data directory (logs stay in root)."""
        cluster, self.cluster = self.cluster, None
        if cluster is None or cluster.base_dir is None:
            return
        with contextlib.suppress(Exception):
            shutil.copy(cluster.log_file, self.root / "logs" / "postgres.log")
        with contextlib.suppress(Exception):
            cluster.stop("fast")
        shutil.rmtree(cluster.base_dir, ignore_errors=True)


def _start_cluster(root: Path) -> Any:
    from qinglong import dev_cli

    cluster = dev_cli._dev_cluster_class()()
    # Under root/pg when the postgres OS user can reach it, else a private temp dir.
    base = dev_cli._cluster_base_dir(root)
    try:
        cluster.start_in(base)
    except BaseException:
        with contextlib.suppress(Exception):
            cluster.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)
        raise
    return cluster


def create_env(root: Path, worker_names: list[str], lease_ttl_s: int) -> SoakEnv:
    """Cluster + migrate + roles + CA + server cert + worker identities + the task."""
    from qinglong import dev_cli
    from qinglong.service import control_plane

    (root / "logs").mkdir(parents=True, exist_ok=True)
    cluster = _start_cluster(root)
    env: SoakEnv | None = None
    try:
        dsn, ingress_dsn, runtime_dsn = dev_cli._prepare_database(cluster)
        tls, ca_file = dev_cli._provision_pki(root)
        env = SoakEnv(root, cluster, dsn, ingress_dsn, runtime_dsn, tls, Path(ca_file))
        with control_plane.connect(dsn) as conn:
            for name in worker_names:
                worker = control_plane.provision_worker(conn, name, root / "ca",
                                                        root / "workers" / name)
                env.workers[name] = WorkerIdentity(name, worker.worker_id, str(worker.cert_file),
                                                   str(worker.key_file),
                                                   str(worker.credential_file))
            env.task_id = _publish_task(conn, lease_ttl_s)
        return env
    except BaseException:
        if env is not None:
            env.cleanup()
        else:
            with contextlib.suppress(Exception):
                cluster.stop("immediate")
            shutil.rmtree(cluster.base_dir, ignore_errors=True)
        raise


def _publish_task(conn: Any, lease_ttl_s: int) -> str:
    from qinglong.service import control_plane
    from qinglong.service.compiler import compile_command

    compiled = compile_command(COMMAND)
    task_id = str(control_plane.publish_revision(conn, PROJECT, TASK, compiled.canonical)["taskId"])
    with conn.transaction():
        conn.execute("UPDATE ql_private.tasks SET lease_ttl_seconds = %s WHERE id = %s",
                     (lease_ttl_s, task_id))  # fmt: skip
    return task_id


def write_config(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    path.chmod(0o600)  # holds a DSN
    return path


def ingress_config(env: SoakEnv, name: str, port: int, admin_port: int) -> Path:
    doc = {
        "dsn": env.ingress_dsn,
        "certFile": env.tls["certFile"],
        "keyFile": env.tls["keyFile"],
        "clientCaFile": env.tls["workerCaFile"],
        "port": port,
        "adminPort": admin_port,
        "poolMaxSize": 4,
        "statementTimeoutMs": 3000,
        # Workers pull again right after every offer and soon after an idle
        # answer: lift the per-worker limiter and keep idle retries short.
        "ratePerS": 100,
        "rateBurst": 200,
        "idleRetryAfterMs": 300,
        "idleJitterMs": 200,
        "auditLog": str(env.root / "logs" / f"{name}.audit.log"),
        "logLevel": "WARNING",
    }
    return write_config(env.root / "config" / f"{name}.json", doc)


def worker_config(env: SoakEnv, name: str, proxy_port: int, slots: int) -> Path:
    ident = env.workers[name]
    doc = {
        "ingressUrl": f"https://127.0.0.1:{proxy_port}",
        "workerId": ident.worker_id,
        "certFile": ident.cert_file,
        "keyFile": ident.key_file,
        "caFile": str(env.ca_file),
        "credentialFile": ident.credential_file,
        "journal": str(env.root / "journals" / name),
        "capabilities": {
            "schema": "qinglong/worker-capabilities@v1", "executors": ["remote-worker"],
            "labels": {}, "runtimes": {}, "slots": slots,
        },
        "cadence": {"idlePollMs": 200, "jitterMs": 200},
        # No executor: every accepted offer stays; leave room for the whole run.
        "inboxCapacity": 1024,
        "requestTimeoutS": 5,
    }
    return write_config(env.root / "config" / f"{name}.json", doc)
