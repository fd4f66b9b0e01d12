"""The availability drill (SPEC §17.3, docs/RELIABILITY.md): `python -m tools.chaos drill`.

The supported topology of docs/OPERATIONS.md on loopback (tools/chaos/ha.py): etcd,
two PostgreSQL 15 nodes under Patroni (`synchronous_mode_strict`), two ingresses
behind HAProxy (TCP mode, health-checked); every database client — ingresses,
sweeper, the drill's own enqueues and snapshots — on the multi-host DSN with
`target_session_attrs=read-write`; the schema migrated through the leader; real
`qinglong worker run --execute` processes pulling through HAProxy while runs are
enqueued. Faults, one after the other, each once the previous one has healed:

1. failover — SIGKILL the leader's Patroni and its PostgreSQL; once the other node
   leads, the killed node's Patroni is started again (it rejoins as the
   synchronous standby, rewound if needed: strict mode commits nothing until it does);
2. switchover — a planned switchover through the leader's REST API;
3. ingress loss — SIGKILL one of the two ingresses (restarted during the heal).

Then the soak's own heal, heal cut, drain and final snapshot (tools/chaos/soak.py),
and the chaos checker over the whole history. Time to offer: from the start of the fault
to the first lease claimed on the surviving primary after the fault took effect
(the kill, or Patroni's answer that the switchover is done), by the final
snapshot's `claimed_at` (same host clock). The last line printed is one JSON object:
`{"faults": [{"kind", "timeToOfferS"}], "lostClaims", "doubleLeases",
"nonTerminalRuns", "anomalies"}`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.chaos import env as soak_env
from tools.chaos.checker import MANIFEST_FILE, Report, check_dir
from tools.chaos.ha import HaStack, ensure_packages
from tools.chaos.history import OK, HistoryWriter, build_history, read_history
from tools.chaos.invariants import DONE_STATES
from tools.chaos.procs import Child
from tools.chaos.snapshot import SNAPSHOT_FILE, read_journal
from tools.chaos.soak import (
    QL,
    RECORDS,
    JournalObserver,
    PullCounter,
    Schedule,
    Soak,
    SoakError,
    SoakPlan,
    _distinct_ports,
)

# Only the quick tasks: every run can end within the drill.
DRILL_TASKS = ("soak", "exec-ok")
PLAN = SoakPlan(
    name="drill",
    min_pulls=0,
    duration_s=0.0,
    max_duration_s=240.0,
    workers=4,
    ingresses=2,
    slots=2,
    lease_ttl_s=10,
    executing=4,
    byzantine_rate_per_s=0.0,
    initial_runs=30,
    enqueue_every_s=0.5,
    enqueue_batch=8,
    pg_restarts=0,
)
BACKLOG_LOW = 16  # queued runs the load keeps at least (enqueue_batch more when below)
FAILOVER_TIMEOUT_S = 60.0
SETTLE_S = 4.0  # offers flowing again before the next fault
OFFER_WAIT_S = 60.0
DRAIN_RUNS_S = 60.0
TARGETS_S = {"failover": 30.0, "switchover": 5.0, "ingress_loss": 5.0}
RESULT_NAME = "drill.json"

__all__ = ["Drill", "DrillFigures", "drill_command"]


@dataclass
class DrillFigures:
    faults: list[dict[str, Any]]
    lost_claims: int
    double_leases: int
    non_terminal_runs: int
    anomalies: int

    def to_doc(self) -> dict[str, Any]:
        return {
            "faults": self.faults,
            "lostClaims": self.lost_claims,
            "doubleLeases": self.double_leases,
            "nonTerminalRuns": self.non_terminal_runs,
            "anomalies": self.anomalies,
        }


class _DbAdapter:
    """What `dev_cli.prepare_database` needs of a cluster, through the HA stack:
    every DSN it returns is the multi-host, read-write one."""

    def __init__(self, stack: HaStack) -> None:
        self.stack = stack

    def create_database(self, name: str) -> str:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.stack.dsn(dbname="postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.stack.dsn(dbname=name)

    def ensure_login_role(self, role: str, member_of: str, dbname: str = "postgres") -> str:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.stack.dsn(dbname=dbname), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if exists is None:
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                        sql.Identifier(role), sql.Identifier(member_of)
                    )
                )
        return self.stack.dsn(user=role, dbname=dbname)


@dataclass(eq=False)
class Drill(Soak):
    stack: HaStack | None = None
    haproxy_port: int = 0
    # kind, when the fault began, when it took effect (epoch s): the time to offer runs
    # from the start to the first lease claimed after the effect, so an offer the old
    # primary made while a switchover was under way does not count.
    fault_times: list[tuple[str, float, float]] = field(default_factory=list)
    _enqueuing: threading.Event = field(default_factory=threading.Event)
    _enqueuer: threading.Thread | None = None

    # -- setup -----------------------------------------------------------------

    def setup(self) -> None:
        from qinglong.throwaway_postgres import free_loopback_port

        self.recorder = HistoryWriter(self.out / RECORDS[0])
        ensure_packages()
        base = Path(tempfile.mkdtemp(prefix="ql-drill-ha-"))
        base.chmod(0o755)  # the postgres OS user reaches its node dirs inside
        self.stack = HaStack(base)
        self.stack.start_database()
        self.log(f"Patroni leader {self._leader_name()}, synchronous standby streaming")
        self.env = self._create_env()
        self.log("schema migrated through the leader; CA and worker identities")
        free = _distinct_ports(free_loopback_port, 2 * len(self.ingresses))
        backends = []
        for name in self.ingresses:
            port, admin = free.pop(), free.pop()
            config = soak_env.ingress_config(self.env, name, port, admin)
            # The HA topology's setting (docs/OPERATIONS.md): a worker that met a
            # failover asks again after 1 s, not the default 2 s.
            soak_env.write_config(
                config,
                json.loads(config.read_text(encoding="utf-8")) | {"unavailableRetryAfterS": 1},
            )
            self.admin_ports[name] = admin
            backends.append((port, admin))
            argv = [*QL, "ingress", "serve", "--processes", "1", "--config", str(config)]
            self.sup.add(Child(name, argv, self.out / "logs" / f"{name}.log")).start()
        self._wait_ready(self.ingresses)
        self.haproxy_port = self.stack.start_haproxy(backends)
        sweep = [*QL, "runtime", "sweep", "--every", "1s"]
        self.sup.add(
            Child(
                "sweeper",
                sweep,
                self.out / "logs" / "sweeper.log",
                env=os.environ | {"QINGLONG_DSN": self.env.sweeper_dsn},
            )
        ).start()
        for task in DRILL_TASKS:
            self.enqueue(self.plan.initial_runs // len(DRILL_TASKS), task)
        self._start_workers(self.haproxy_port)
        self._write_manifest()
        self.pulls = PullCounter(self.admin_ports).start()
        roots = {name: self.out / "journals" / name for name in self.workers}
        self.observer = JournalObserver(roots, HistoryWriter(self.out / RECORDS[1])).start()
        self.log(
            f"{len(self.ingresses)} ingresses behind HAProxy :{self.haproxy_port}, "
            f"sweeper, {len(self.workers)} executing workers"
        )

    def _create_env(self) -> soak_env.SoakEnv:
        from qinglong import dev_cli, local_stack
        from qinglong.db import api
        from qinglong.service import control_plane

        assert self.stack is not None
        (self.out / "logs").mkdir(parents=True, exist_ok=True)
        dsns = dev_cli.prepare_database(_DbAdapter(self.stack))
        pki = local_stack.provision_pki(self.out)
        tls, ca_file = pki.tls(), pki.ca_file
        env = soak_env.SoakEnv(
            self.out,
            None,
            dsn=dsns.superuser,
            ingress_dsn=dsns.ingress,
            runtime_dsn=dsns.runtime,
            sweeper_dsn=dsns.sweeper,
            tls=tls,
            ca_file=Path(ca_file),
        )
        with control_plane.connect(dsns.superuser) as conn:
            project, pool = soak_env.HOSTILE_POOL.split("/")
            # The pool and the project, its default.
            control_plane.run(conn, api.create_pool(project=project, name=pool))
            for name in self.workers:
                env.workers[name] = soak_env._provision(conn, self.out, name, hostile=False)
            for spec in soak_env.TASKS:
                env.tasks[spec.name] = soak_env._publish_task(
                    conn, spec, self.plan.lease_ttl_s, soak_env.HONEST_POOL
                )
        env.task_id = env.tasks[soak_env.TASK]
        env.runs_root = Path(tempfile.mkdtemp(prefix="ql-drill-runs-"))
        env.runs_root.chmod(0o711)
        return env

    def _leader_name(self) -> str:
        assert self.stack is not None
        leader = self.stack.leader()
        return leader.name if leader is not None else "none"

    # -- load ------------------------------------------------------------------

    def _enqueue_loop(self) -> None:
        """Keep a backlog of queued runs, so that the time to the next offer measures
        the outage, not a queue that happened to be empty."""
        tasks = list(DRILL_TASKS)
        while not self._enqueuing.wait(self.plan.enqueue_every_s):
            if self._queued() < BACKLOG_LOW:
                self.enqueue(self.plan.enqueue_batch, self.rng.choice(tasks))

    def _queued(self) -> int:
        """Runs waiting for a worker; a large number when the database cannot say."""
        import psycopg

        assert self.env is not None
        with contextlib.suppress(psycopg.Error):
            with psycopg.connect(self.env.dsn, connect_timeout=2) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM ql_private.runs WHERE state = 'queued'"
                ).fetchone()
                return int(row[0]) if row else BACKLOG_LOW
        return BACKLOG_LOW

    def _start_load(self) -> None:
        self._enqueuer = threading.Thread(
            target=self._enqueue_loop, daemon=True, name="drill-enqueue"
        )
        self._enqueuer.start()

    def _stop_load(self) -> None:
        self._enqueuing.set()
        if self._enqueuer is not None:
            self._enqueuer.join(timeout=30)

    def _offers_since(self, since_s: float) -> bool:
        """A lease claimed on the primary after `since_s` (epoch seconds)."""
        import psycopg

        assert self.env is not None
        with contextlib.suppress(psycopg.Error):
            with psycopg.connect(self.env.dsn, connect_timeout=2) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM ql_private.run_leases"
                    " WHERE claimed_at > to_timestamp(%s)",
                    (since_s,),
                ).fetchone()
                return bool(row and row[0] > 0)
        return False

    def _settle(self) -> None:
        """Offers flow (one claimed after this moment) before the next fault."""
        assert self.stack is not None
        mark = time.time()
        HaStack.wait_for(lambda: self._offers_since(mark), OFFER_WAIT_S, "offer after the fault")
        time.sleep(SETTLE_S)

    # -- faults ----------------------------------------------------------------

    def fault_phase(self) -> Schedule:
        assert self.stack is not None
        self._start_load()
        self._settle()
        self._failover()
        self._settle()
        self._switchover()
        self._settle()
        self._kill_ingress()
        self._settle()
        now = time.monotonic()
        return Schedule(
            ingress_kill=now, worker_kill=now, spike=now, enqueue=now, cancel=now, pg_restarts=[]
        )

    def _failover(self) -> None:
        assert self.stack is not None
        began = time.time()
        killed = self.stack.kill_leader()
        self.fault_times.append(("failover", began, time.time()))
        self.fault("failover", killed.name)
        self.log(f"failover: SIGKILLed {killed.name}'s Patroni and PostgreSQL")
        took = self.stack.wait_for(
            lambda: self.stack.leader() not in (None, killed),  # type: ignore[union-attr]
            FAILOVER_TIMEOUT_S,
            "new leader",
        )
        self.log(f"  {self._leader_name()} leads after {took:.1f}s; restarting {killed.name}")
        self.stack.restart_node(killed)
        took = self.stack.wait_for(
            self.stack.replicating, FAILOVER_TIMEOUT_S, "synchronous standby"
        )
        self.log(f"  {killed.name} streams as the synchronous standby after {took:.1f}s more")

    def _switchover(self) -> None:
        assert self.stack is not None
        began = time.time()
        old, new = self.stack.switchover()  # Patroni answers once the candidate leads
        self.fault_times.append(("switchover", began, time.time()))
        self.fault("switchover", f"{old.name}->{new.name}")
        self.log(
            f"switchover {old.name} -> {new.name}: Patroni answered after "
            f"{self.fault_times[-1][2] - began:.1f}s"
        )
        took = self.stack.wait_for(
            self.stack.replicating, FAILOVER_TIMEOUT_S, "synchronous standby"
        )
        self.log(f"  {old.name} streams as the synchronous standby after {took:.1f}s more")

    def _kill_ingress(self) -> None:
        name = self.ingresses[0]
        began = time.time()
        self.sup.children[name].kill()
        self.fault_times.append(("ingress_loss", began, time.time()))
        self.fault("kill_ingress", name)
        self.log(f"ingress loss: SIGKILLed {name}")

    # -- heal ------------------------------------------------------------------

    def heal(self, schedule: Schedule) -> None:
        self._stop_load()
        for name in self.ingresses:
            if not self.sup.children[name].alive:
                self.sup.children[name].start()
        self._wait_ready(self.ingresses)
        self.record("nemesis", "info", "heal")
        wait_s = self.plan.lease_ttl_s + 5
        self.log(f"faults off; healing for {wait_s}s, then until every run has ended")
        time.sleep(wait_s)
        deadline = time.monotonic() + DRAIN_RUNS_S
        while self._open_runs() and time.monotonic() < deadline:
            time.sleep(1)

    def _open_runs(self) -> int:
        import psycopg

        assert self.env is not None
        with contextlib.suppress(psycopg.Error):
            with psycopg.connect(self.env.dsn, connect_timeout=2) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM ql_private.runs WHERE state NOT IN"
                    " ('succeeded', 'failed', 'cancelled')"
                ).fetchone()
                return int(row[0]) if row else 1
        return 1

    def _close_proxy(self) -> None:
        if self.stack is not None:
            self.stack.stop()

    def _cleanup_env(self) -> None:
        if self.stack is not None:
            self.stack.cleanup(keep_logs=self.out / "logs")
        if self.env is not None and self.env.runs_root is not None:
            shutil.rmtree(self.env.runs_root, ignore_errors=True)

    # -- the whole drill ---------------------------------------------------------

    def run(self) -> Report:
        try:
            self._stop_load_on_error(self.setup)
            schedule = self._stop_load_on_error(self.fault_phase)
            self.heal(schedule)
            self.heal_cut()
            self.stop_workers()
            self.final_snapshot()
        finally:
            self._stop_load()
            self.teardown()
        logs = {name: self.out / "logs" / f"{name}.log" for name in self.workers}
        ops = build_history(self.out, logs, [self.out / name for name in RECORDS])
        report = check_dir(self.out, strict=self.strict)
        self._write_result(report, ops)
        return report

    def _stop_load_on_error(self, step: Any) -> Any:
        try:
            return step()
        except BaseException:
            self._stop_load()
            raise

    def figures(self, report: Report) -> DrillFigures:
        snapshot = json.loads((self.out / SNAPSHOT_FILE).read_text(encoding="utf-8"))
        leases = snapshot["leases"]
        faults = []
        for kind, began_s, effective_s in self.fault_times:
            after = [
                lease["claimedAtUs"] / 1e6
                for lease in leases
                if lease["claimedAtUs"] / 1e6 > effective_s
            ]
            faults.append(
                {"kind": kind, "timeToOfferS": round(min(after) - began_s, 2) if after else None}
            )
        return DrillFigures(
            faults,
            lost_claims(self.out, leases),
            sum(1 for a in report.anomalies if a.cls == "a"),
            sum(1 for r in snapshot["runs"] if r["state"] not in DONE_STATES),
            len(report.anomalies),
        )


def lost_claims(out: Path, leases: list[dict[str, Any]]) -> int:
    """Acknowledged claims (a worker's `claim.accepted`, every inbox entry of the heal
    cut and of the journals as left) with no lease on the surviving primary."""
    known = {lease["offerId"] for lease in leases}
    claimed = {
        op.offer_id
        for op in read_history(out)
        if op.type == OK and op.f == "claim" and op.value == "accepted" and op.offer_id
    }
    heal = out / "heal.json"
    if heal.exists():
        for ids in json.loads(heal.read_text(encoding="utf-8"))["journals"].values():
            claimed.update(ids["inbox"])
    manifest = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))
    for worker in manifest["workers"].values():
        claimed.update(read_journal(out / worker["journal"]).inbox)
    return len(claimed - known)


def sync_waits_cancelled(logs: Path) -> int:
    """PostgreSQL's WARNING for a commit whose wait for the synchronous standby was
    cancelled (a statement timeout): committed locally, acknowledged, not replicated."""
    return sum(
        path.read_text(encoding="utf-8", errors="replace").count(
            "canceling wait for synchronous replication"
        )
        for path in logs.glob("pg*-patroni.log")
    )


def drill_command(args: Any) -> int:
    from tools.chaos.cli import _sigterm_as_interrupt, summary

    plan = PLAN if args.seed is None else _with_seed(args.seed)
    out = (args.out or Path(tempfile.mkdtemp(prefix="qinglong-drill-"))).absolute()
    drill = Drill(plan, out, say=lambda text: print(text, flush=True))
    print(f"availability drill, seed {drill.seed}, out {out}", flush=True)
    try:
        with _sigterm_as_interrupt():
            report = drill.run()
    except SoakError as exc:
        print(f"drill failed: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the HA stack: what was measured is in the logs under out
        print(f"drill failed: {type(exc).__name__}: {exc} (logs: {out / 'logs'})", file=sys.stderr)
        return 2
    for line in summary(report):
        print(line)
    figures = drill.figures(report)
    # haRoot: where the HA stack lived (removed by now; no process may still name it).
    cancelled = sync_waits_cancelled(out / "logs")
    print(f"commits acknowledged before the standby had them (sync waits cancelled): {cancelled}")
    doc = figures.to_doc() | {
        "haRoot": str(drill.stack.root) if drill.stack else None,
        "syncWaitsCancelled": cancelled,
    }
    (out / RESULT_NAME).write_text(json.dumps(doc, indent=2), encoding="utf-8")
    late = [
        f
        for f in figures.faults
        if f["timeToOfferS"] is None or f["timeToOfferS"] > TARGETS_S[f["kind"]]
    ]
    for fault in late:
        print(
            f"over target: {fault['kind']} {fault['timeToOfferS']}s "
            f"(target {TARGETS_S[fault['kind']]:.0f}s)"
        )
    print(json.dumps(figures.to_doc(), separators=(",", ":")), flush=True)
    clean = not (
        figures.lost_claims
        or figures.double_leases
        or figures.non_terminal_runs
        or figures.anomalies
    )
    return 0 if clean and not late else 1


def _with_seed(seed: int) -> SoakPlan:
    import dataclasses

    return dataclasses.replace(PLAN, seed=seed)
