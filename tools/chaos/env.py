"""The soak's loopback environment, assembled from the dev env's own helpers.

PostgreSQL, migration, login roles and the dev PKI come from `qinglong.local_stack`
and `qinglong.dev_cli` (the same calls `qinglong dev up` makes); worker identities from
`service.control_plane.provision_worker` (what `admin worker create` calls).
The cluster is always a private one (never `QL_TEST_DSN`): the soak restarts it
with `pg_ctl restart -m immediate`, which a shared server must not suffer.

Tasks (TASKS): `soak` (`true`, any worker: the non-executing workers hold its
offers until they expire, the executing ones run it), and three tasks whose
placement requires the label `fleet=exec` that only executing workers carry
(`--execute --run-as USER`, SPEC §7/§11): `exec-ok` sleeps a little and succeeds,
`exec-long` sleeps past two lease heartbeats (the cancellation target) and
`exec-fail` exits 3. Every task's lease TTL and retry policy is set through
`configure_task` (SPEC §9.1, what `admin task configure` calls) and written to
the manifest, so the checker judges retries against the policy in force.

Two pools (SPEC §13.1): those tasks live in `chaos/default`, the one pool the
honest workers are granted. The hostile worker (tools/chaos/byzantine.py) is
granted only `chaos/hostile`, where HOSTILE_TASK's runs wait for its honest
pulls, and only its own labels (HOSTILE_LABELS; not self-labels, §13.2): a
session declaring the honest fleet's labels must be refused label_not_granted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROJECT = "chaos"
TASK = "soak"
EXEC_LABEL = {"fleet": "exec"}  # carried by executing workers only
HONEST_POOL = f"{PROJECT}/default"  # every TASKS run, the honest workers' only grant
HOSTILE_POOL = f"{PROJECT}/hostile"  # the hostile worker's only grant
# Its only granted label: a case variant of the honest fleet's (never `exec`).
HOSTILE_LABELS = {"fleet": "Exec"}


@dataclass(frozen=True)
class TaskSpec:
    """One task of the soak, its retry policy and what its command does."""

    name: str
    argv: tuple[str, ...]
    expect: str  # "succeeded" | "failed": how the command ends on its own
    exit_code: int = 0
    exec_only: bool = False  # placement requires EXEC_LABEL
    max_attempts: int = 3
    retry_base_ms: int = 200
    retry_cap_ms: int = 2000
    weight: int = 1  # share of the enqueued runs

    def command(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"schema": "qinglong/command@v1", "argv": list(self.argv),
                               "env": {}, "timeoutS": 60}  # fmt: skip
        if self.exec_only:
            labels = {k: [v] for k, v in EXEC_LABEL.items()}
            doc["placement"] = {"required": {"executors": ["remote-worker"], "labels": labels,
                                             "runtimes": {}}, "preferred": []}  # fmt: skip
        return doc

    def manifest(self, task_id: str, lease_ttl_s: int) -> dict[str, Any]:
        return {"taskId": task_id, "expect": self.expect, "exitCode": self.exit_code,
                "execOnly": self.exec_only, "maxAttempts": self.max_attempts,
                "retryBaseMs": self.retry_base_ms, "retryCapMs": self.retry_cap_ms,
                "leaseTtlS": lease_ttl_s}  # fmt: skip


TASKS: tuple[TaskSpec, ...] = (
    TaskSpec(TASK, ("true",), "succeeded", weight=3),
    TaskSpec("exec-ok", ("sh", "-c", "sleep 1"), "succeeded", exec_only=True),
    # Runs for several heartbeats (TTL/3 each): a cancel requested meanwhile is seen.
    TaskSpec(
        "exec-long",
        ("sh", "-c", "sleep 20"),
        "succeeded",
        exec_only=True,
        max_attempts=2,
        retry_base_ms=500,
    ),
    TaskSpec(
        "exec-fail",
        ("sh", "-c", "sleep 0.3; exit 3"),
        "failed",
        exit_code=3,
        exec_only=True,
        retry_cap_ms=1000,
    ),
)

# The hostile pool's task: runs its honest pulls are offered (none other can take them).
HOSTILE_TASK = TaskSpec("hostile", ("true",), "succeeded")

__all__ = [
    "EXEC_LABEL",
    "HONEST_POOL",
    "HOSTILE_LABELS",
    "HOSTILE_POOL",
    "HOSTILE_TASK",
    "TASKS",
    "SoakEnv",
    "TaskSpec",
    "create_env",
]


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
    cluster: Any  # qinglong.local_stack.PersistentPostgres
    # DSNs may carry passwords: never in a repr.
    dsn: str = field(repr=False)  # superuser
    ingress_dsn: str = field(repr=False)
    runtime_dsn: str = field(repr=False)  # the operator's (publish, configure, inspect)
    sweeper_dsn: str = field(repr=False)  # IN ROLE ql_sweeper only (SPEC §13.6)
    tls: dict[str, str]
    ca_file: Path
    task_id: str = ""  # the `soak` task
    tasks: dict[str, str] = field(default_factory=dict)  # name -> task id
    workers: dict[str, WorkerIdentity] = field(default_factory=dict)
    runs_root: Path | None = None  # executing workers' runs dirs (SPEC §11)

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
        if self.runs_root is not None:
            shutil.rmtree(self.runs_root, ignore_errors=True)


def _start_cluster(root: Path) -> Any:
    from qinglong import local_stack

    cluster = local_stack.PersistentPostgres()
    # Under root/pg when the postgres OS user can reach it, else a private temp dir.
    base = local_stack.cluster_base_dir(root)
    try:
        cluster.start_in(base)
    except BaseException:
        with contextlib.suppress(Exception):
            cluster.stop("immediate")
        shutil.rmtree(base, ignore_errors=True)
        raise
    return cluster


def create_env(
    root: Path, worker_names: list[str], lease_ttl_s: int, hostile: str | None = None
) -> SoakEnv:
    """Cluster + migrate + roles + CA + server cert + worker identities + the tasks.

    `hostile` names the identity of the hostile worker (granted HOSTILE_POOL and
    HOSTILE_LABELS only); every other worker is granted HONEST_POOL."""
    from qinglong import dev_cli, local_stack
    from qinglong.db import api
    from qinglong.service import control_plane

    (root / "logs").mkdir(parents=True, exist_ok=True)
    cluster = _start_cluster(root)
    env: SoakEnv | None = None
    try:
        dsns = dev_cli.prepare_database(cluster)
        pki = local_stack.provision_pki(root)
        tls, ca_file = pki.tls(), pki.ca_file
        env = SoakEnv(
            root,
            cluster,
            dsn=dsns.superuser,
            ingress_dsn=dsns.ingress,
            runtime_dsn=dsns.runtime,
            sweeper_dsn=dsns.sweeper,
            tls=tls,
            ca_file=Path(ca_file),
        )
        with control_plane.connect(dsns.superuser) as conn:
            project, pool = HOSTILE_POOL.split("/")
            # The pool and the project, its default.
            control_plane.run(conn, api.create_pool(project=project, name=pool))
            for name in worker_names:
                env.workers[name] = _provision(conn, root, name, hostile=name == hostile)
            for spec in TASKS:
                env.tasks[spec.name] = _publish_task(conn, spec, lease_ttl_s, HONEST_POOL)
            if hostile is not None:
                env.tasks[HOSTILE_TASK.name] = _publish_task(conn, HOSTILE_TASK, lease_ttl_s,
                                                             HOSTILE_POOL)  # fmt: skip
            env.task_id = env.tasks[TASK]
        # The run-as user must reach its runs dir: outside the private soak dir.
        env.runs_root = Path(tempfile.mkdtemp(prefix="ql-chaos-runs-"))
        env.runs_root.chmod(0o711)
        return env
    except BaseException:
        if env is not None:
            env.cleanup()
        else:
            with contextlib.suppress(Exception):
                cluster.stop("immediate")
            shutil.rmtree(cluster.base_dir, ignore_errors=True)
        raise


def _provision(conn: Any, root: Path, name: str, *, hostile: bool) -> WorkerIdentity:
    from qinglong.service import control_plane

    if hostile:  # its own pool and labels only; declared labels must be granted
        grants: dict[str, Any] = {"pools": (HOSTILE_POOL,), "labels": HOSTILE_LABELS,
                                  "self_labels": False}  # fmt: skip
    else:  # self-labels: the honest fleet declares `fleet=exec` as before §13.2
        grants = {"pools": (HONEST_POOL,), "self_labels": True}
    worker = control_plane.provision_worker(conn, name, root / "ca", root / "workers" / name,
                                            **grants)  # fmt: skip
    return WorkerIdentity(name, worker.worker_id, str(worker.cert_file), str(worker.key_file),
                          str(worker.credential_file))  # fmt: skip


def _publish_task(conn: Any, spec: TaskSpec, lease_ttl_s: int, pool: str) -> str:
    from qinglong.db import api
    from qinglong.service import control_plane
    from qinglong.service.compiler import compile_command

    compiled = compile_command(spec.command())
    published = control_plane.run(
        conn,
        api.publish_revision(
            project=PROJECT, task=spec.name, canonical=compiled.canonical, pool=pool
        ),
    )
    task_id = published.task_id
    control_plane.configure_task(
        conn,
        task_id,
        control_plane.TaskSettings(
            lease_ttl_s=lease_ttl_s,
            max_attempts=spec.max_attempts,
            retry_base_ms=spec.retry_base_ms,
            retry_cap_ms=spec.retry_cap_ms,
        ),
    )
    return task_id


def write_config(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Holds a DSN: 0600 from creation (a chmod afterwards leaves a window).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(doc, indent=2))
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


def worker_config(env: SoakEnv, name: str, proxy_port: int, slots: int,
                  execute: bool = False) -> Path:  # fmt: skip
    ident = env.workers[name]
    doc: dict[str, Any] = {
        "ingressUrl": f"https://127.0.0.1:{proxy_port}",
        "workerId": ident.worker_id,
        "certFile": ident.cert_file,
        "keyFile": ident.key_file,
        "caFile": str(env.ca_file),
        "credentialFile": ident.credential_file,
        "journal": str(env.root / "journals" / name),
        "capabilities": {
            "schema": "qinglong/worker-capabilities@v1",
            "executors": ["remote-worker"],
            "labels": dict(EXEC_LABEL) if execute else {},
            "runtimes": {},
            "slots": slots,
        },
        "cadence": {"idlePollMs": 200, "jitterMs": 200},
        # No executor: every accepted offer stays; leave room for the whole run.
        "inboxCapacity": 1024,
        "requestTimeoutS": 5,
    }
    if execute:
        assert env.runs_root is not None
        doc["execute"] = True
        # A drain stops running commands soon (completed failed/worker_shutdown).
        doc["executor"] = {"shutdownGraceS": 2, "killGraceS": 1,
                           "runsDir": str(env.runs_root / name)}  # fmt: skip
    return write_config(env.root / "config" / f"{name}.json", doc)
