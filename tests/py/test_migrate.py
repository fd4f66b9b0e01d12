"""`qinglong db migrate` (R-MIG): ordered, checksummed, one transaction, advisory lock."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest

from qinglong.db.migrator import REWORDED_HEADERS, MigrationError, load_migrations, migrate


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qinglong", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _recorded(dsn: str) -> list[tuple]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT version, name, checksum, applied_at FROM ql_private.schema_migrations"
            " ORDER BY version"
        ).fetchall()


def test_migrate_twice_is_a_noop(empty_db_dsn: str) -> None:
    first = _cli("db", "migrate", "--dsn", empty_db_dsn)
    assert first.returncode == 0, first.stderr
    applied = json.loads(first.stdout)["applied"]
    assert applied == [m.name for m in load_migrations()]
    recorded = _recorded(empty_db_dsn)
    second = _cli("db", "migrate", "--dsn", empty_db_dsn)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["applied"] == []
    assert _recorded(empty_db_dsn) == recorded


def test_concurrent_migrates_both_succeed_once(empty_db_dsn: str) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "qinglong", "db", "migrate", "--dsn", empty_db_dsn],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0], outputs
    applied = [json.loads(out)["applied"] for out, _ in outputs]
    assert sorted(len(a) for a in applied) == [0, 0, len(load_migrations())]
    names = [row[1] for row in _recorded(empty_db_dsn)]
    assert names == [m.name for m in load_migrations()]


def test_modified_applied_migration_is_refused(empty_db_dsn: str) -> None:
    migrate(empty_db_dsn)
    with psycopg.connect(empty_db_dsn) as conn:
        conn.execute(
            "UPDATE ql_private.schema_migrations SET checksum = repeat('0', 64) WHERE version = 1"
        )
    result = _cli("db", "migrate", "--dsn", empty_db_dsn)
    assert result.returncode == 2
    error = json.loads(result.stderr)
    assert error["error"] == "migration_refused"
    assert "0001_core_schema.sql" in error["detail"]
    assert "immutable" in error["detail"]
    status = _cli("db", "status", "--dsn", empty_db_dsn)
    states = {m["name"]: m["state"] for m in json.loads(status.stdout)["migrations"]}
    assert states["0001_core_schema.sql"] == "modified"
    assert status.returncode == 1


# What the statements of 0005 were when it landed (everything after its header).
LANDED_0005_BODY = "c65fc712cf9e8ae85e183ae14ff3108bb2b954dd2461317548222ca9c8e9f562"


def test_reworded_headers_changed_comments_only() -> None:
    by_name = {m.name: m for m in load_migrations()}
    assert set(REWORDED_HEADERS) == {"0005_idle_view.sql"}
    assert by_name["0005_idle_view.sql"].body_checksum == LANDED_0005_BODY
    for name, landed in REWORDED_HEADERS.items():
        assert by_name[name].checksum != landed  # else the entry is dead: remove it


def test_reworded_header_is_re_recorded_not_refused(empty_db_dsn: str) -> None:
    migrate(empty_db_dsn)
    name = "0005_idle_view.sql"
    with psycopg.connect(empty_db_dsn) as conn:
        conn.execute(
            "UPDATE ql_private.schema_migrations SET checksum = %s WHERE name = %s",
            (REWORDED_HEADERS[name], name),
        )
    before = {
        m["name"]: m["state"]
        for m in json.loads(_cli("db", "status", "--dsn", empty_db_dsn).stdout)["migrations"]
    }
    assert before[name] == "reworded"
    result = _cli("db", "migrate", "--dsn", empty_db_dsn)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["applied"] == []
    current = {m.name: m.checksum for m in load_migrations()}
    assert {row[1]: row[2] for row in _recorded(empty_db_dsn)}[name] == current[name]
    # Any other checksum of the same file is still a modification.
    with psycopg.connect(empty_db_dsn) as conn:
        conn.execute(
            "UPDATE ql_private.schema_migrations SET checksum = repeat('1', 64) WHERE name = %s",
            (name,),
        )
    refused = _cli("db", "migrate", "--dsn", empty_db_dsn)
    assert refused.returncode == 2 and name in json.loads(refused.stderr)["detail"]


def test_dry_run_changes_nothing(empty_db_dsn: str) -> None:
    result = migrate(empty_db_dsn, dry_run=True)
    assert result.dry_run and result.applied
    with psycopg.connect(empty_db_dsn) as conn:
        exists = conn.execute("SELECT to_regnamespace('ql_private')").fetchone()[0]
    assert exists is None


def test_everything_is_owned_by_ql_owner(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:
        foreign = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname IN ('ql', 'ql_private')"
            "   AND pg_get_userbyid(c.relowner) <> 'ql_owner'"
            " UNION ALL"
            " SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname IN ('ql', 'ql_private')"
            "   AND pg_get_userbyid(p.proowner) <> 'ql_owner'"
        ).fetchall()
    assert foreign == []


def test_unknown_recorded_migration_is_refused(empty_db_dsn: str) -> None:
    migrate(empty_db_dsn)
    with psycopg.connect(empty_db_dsn) as conn:
        conn.execute(
            "INSERT INTO ql_private.schema_migrations (version, name, checksum)"
            " VALUES (9999, '9999_from_the_future.sql', repeat('a', 64))"
        )
    with pytest.raises(MigrationError, match="9999_from_the_future"):
        migrate(empty_db_dsn)


def test_0006_backfills_the_placement_class_of_dispatchable_runs(db_dsn: str) -> None:
    """The backfill statements of 0006, run against runs queued without a class
    (as every run enqueued before 0006 was), give each queued run its class."""
    from tests.py.provision import Provisioner, command

    text = next(m for m in load_migrations() if m.name.startswith("0006")).text
    statements = [
        "\n".join(line for line in chunk.splitlines() if not line.startswith("--"))
        for chunk in text.split(";")
    ]
    backfill = [
        stmt.strip() for stmt in statements if stmt.strip().startswith(("INSERT INTO", "UPDATE"))
    ]
    assert len(backfill) == 2, backfill
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        prov = Provisioner(conn)
        gpu = command(placement={"required": {"labels": {"gpu": "yes"}}})
        runs = prov.enqueue(prov.task("gpu", gpu), count=3) + prov.enqueue(prov.task("plain"))
        conn.execute("UPDATE ql_private.runs SET placement_class = NULL")
        conn.execute("DELETE FROM ql_private.placement_classes")
        for stmt in backfill:
            conn.execute(stmt)
        rows = conn.execute(
            "SELECT r.id::text, pc.required -> 'labels' FROM ql_private.runs r"
            " JOIN ql_private.placement_classes pc ON pc.id = r.placement_class"
        ).fetchall()
    labels = dict(rows)
    assert set(labels) == set(runs)
    assert [labels[r] for r in runs] == [{"gpu": ["yes"]}] * 3 + [{}]


def test_0016_pins_each_live_row_to_its_tasks_settings(db_dsn: str) -> None:
    """The statements of 0016, run against attempts and leases written before it
    (the pinned columns dropped again, in a transaction rolled back at the end),
    pin each row to its task's settings as they are now, and leave the columns
    NOT NULL."""
    from qinglong.db import api
    from tests.py.provision import Intent, Provisioner

    text = next(m for m in load_migrations() if m.name.startswith("0016")).text
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    statements = [
        stmt.strip()
        for stmt in code.split(";")
        if stmt.strip().startswith(("ALTER TABLE", "UPDATE"))
    ]
    assert len(statements) == 7, statements
    with psycopg.connect(db_dsn) as conn:
        prov = Provisioner(conn)
        slow, fast = prov.task("slow"), prov.task("fast")
        runs = prov.enqueue(slow, count=2) + prov.enqueue(fast)
        session = prov.session(prov.worker())
        assert prov.pull(session, Intent())["status"] == "offered"
        prov.call(
            api.configure_task(
                task_id=slow, lease_ttl_s=600, max_attempts=7, retry_base_ms=200, retry_cap_ms=900
            )
        )
        conn.execute("ALTER TABLE ql_private.run_leases DROP COLUMN lease_ttl_seconds")
        conn.execute(
            "ALTER TABLE ql_private.attempts DROP COLUMN max_attempts,"
            " DROP COLUMN retry_base_ms, DROP COLUMN retry_cap_ms"
        )
        for stmt in statements:
            conn.execute(stmt)
        pinned = dict(
            conn.execute(
                "SELECT a.run_id::text, array[a.max_attempts, a.retry_base_ms, a.retry_cap_ms]"
                " FROM ql_private.attempts a"
            ).fetchall()
        )
        ttl = conn.execute(
            "SELECT run_id::text, lease_ttl_seconds FROM ql_private.run_leases"
        ).fetchall()
        nullable = conn.execute(
            "SELECT count(*) FROM pg_attribute WHERE NOT attnotnull AND attname IN"
            " ('lease_ttl_seconds', 'max_attempts', 'retry_base_ms', 'retry_cap_ms')"
            " AND attrelid IN ('ql_private.run_leases'::regclass,"
            " 'ql_private.attempts'::regclass)"
        ).fetchone()
        conn.rollback()
    assert pinned == {runs[0]: [7, 200, 900], runs[1]: [7, 200, 900], runs[2]: [3, 1000, 300000]}
    assert ttl == [(runs[0], 600)]
    assert nullable == (0,)


def test_0020_keeps_every_existing_worker_on_self_labels(db_dsn: str) -> None:
    """The statements of 0020, run against workers registered before it (its
    column and table dropped again, in a transaction rolled back at the end):
    each existing worker keeps today's behaviour, explicitly (self_labels true)
    and its session still opens with labels nobody granted; a worker registered
    after it accepts only granted labels."""
    from qinglong.db import api
    from qinglong.schemas.canonical import canonical_bytes
    from tests.py.provision import DEFAULT_CAPABILITIES, Provisioner

    text = next(m for m in load_migrations() if m.name.startswith("0020")).text
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    statements = [
        stmt.strip()
        for stmt in code.split(";")
        if stmt.strip().startswith(("ALTER TABLE", "CREATE TABLE"))
    ]
    assert len(statements) == 3, statements
    labelled = {**DEFAULT_CAPABILITIES, "labels": {"tenant": "bank"}}
    with psycopg.connect(db_dsn) as conn:
        prov = Provisioner(conn)
        before = prov.worker("before", self_labels=False)
        conn.execute("DROP TABLE ql_private.worker_labels")
        conn.execute("ALTER TABLE ql_private.workers DROP COLUMN self_labels")
        conn.execute("SET LOCAL ROLE ql_owner")  # as the migrator runs it
        for stmt in statements:
            conn.execute(stmt)
        conn.execute("RESET ROLE")
        after = prov.worker("after", self_labels=False)
        flags = dict(
            conn.execute("SELECT id::text, self_labels FROM ql_private.workers").fetchall()
        )
        prov.session(before, labelled)  # asserts status ok
        with pytest.raises(psycopg.Error) as refused:
            prov.call(
                api.open_session(
                    credential_id=after.credential_id,
                    secret_digest=after.secret_digest,
                    worker_id=after.worker_id,
                    capabilities_canonical=canonical_bytes(labelled),
                )
            )
        conn.rollback()
    assert flags == {before.worker_id: True, after.worker_id: False}
    assert refused.value.sqlstate == "QL016"


def test_0019_puts_existing_work_in_default_pools_and_keeps_workers_working(db_dsn: str) -> None:
    """0019 applied to a database as 0018 left it (its objects dropped again, in a
    transaction rolled back at the end), with runs in flight: every task and run
    lands in its project's default pool, every worker holds an explicit,
    revocable grant of every default pool (not '*'), its in-flight offer stays
    live, and its next pull is offered the next run."""
    from qinglong.db.migrator import load_functions
    from tests.py.provision import Intent, Provisioner

    text = next(m for m in load_migrations() if m.name.startswith("0019")).text
    pool_of = next(f for f in load_functions() if f.name == "pool_of.sql").text
    with psycopg.connect(db_dsn) as conn:
        prov = Provisioner(conn)
        runs = prov.enqueue(prov.task("t1", project="p1"), count=2) + prov.enqueue(
            prov.task("t2", project="p2")
        )
        worker = prov.worker(all_pools=False)
        conn.execute(
            "INSERT INTO ql_private.worker_pool_grants (worker_id, pool_id)"
            " SELECT %s::uuid, id FROM ql_private.pools",
            (worker.worker_id,),
        )
        session = prov.session(worker)
        first = prov.pull(session, Intent())
        assert first["status"] == "offered"
        conn.execute("""
            DROP TRIGGER projects_default_pool ON ql_private.projects;
            DROP TRIGGER tasks_default_pool ON ql_private.tasks;
            DROP TRIGGER runs_default_pool ON ql_private.runs;
            DROP FUNCTION ql_private.project_default_pool(), ql_private.task_default_pool(),
                          ql_private.run_default_pool();
            DROP TABLE ql_private.worker_pool_grants;
            ALTER TABLE ql_private.tasks DROP COLUMN pool_id;
            ALTER TABLE ql_private.runs DROP COLUMN pool_id;
            DROP TABLE ql_private.pools CASCADE;  -- and ql_private.pool_of (its row type)
            ALTER TABLE ql_private.workers DROP COLUMN all_pools;
            SET LOCAL ROLE ql_owner;""")
        for sql in (text, pool_of):  # as migrate does: the migration, then the functions
            conn.execute(sql.encode("utf-8"), prepare=False)  # type: ignore[arg-type]
        conn.execute("RESET ROLE")
        placed = conn.execute(
            "SELECT count(*) FILTER (WHERE pl.name = 'default' AND pl.project_id = t.project_id),"
            " count(*) FROM ql_private.runs r JOIN ql_private.tasks t ON t.id = r.task_id"
            " JOIN ql_private.pools pl ON pl.id = r.pool_id AND pl.id = t.pool_id"
        ).fetchone()
        grants = conn.execute(
            "SELECT w.all_pools, array_agg(p.name ORDER BY p.name) FROM ql_private.workers w"
            " JOIN ql_private.worker_pool_grants g ON g.worker_id = w.id"
            " JOIN ql_private.pools pl ON pl.id = g.pool_id AND pl.name = 'default'"
            " JOIN ql_private.projects p ON p.id = pl.project_id"
            " WHERE w.id = %s::uuid GROUP BY w.all_pools",
            (worker.worker_id,),
        ).fetchone()
        live = conn.execute(
            "SELECT count(*) FROM ql_private.run_leases WHERE released_at IS NULL"
        ).fetchone()
        second = prov.pull(session, Intent())
        conn.rollback()
    assert placed == (3, 3)
    assert grants == (False, ["p1", "p2"])
    assert live == (1,)
    assert second["status"] == "offered"
    assert {first["offer"]["lease"]["runId"], second["offer"]["lease"]["runId"]} <= set(runs)
