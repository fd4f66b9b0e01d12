"""Runs the pgTAP suite (tests/sql/*.sql) with pg_prove, each file on a fresh migrated database.

Each .sql file runs in its own transaction and rolls back; fixtures live in
tests/sql/*.psql, which pg_prove does not pick up (`--ext .sql`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import psycopg

from qinglong.db.migrator import bootstrap
from qinglong.throwaway_postgres import ThrowawayPostgres

SQL_TESTS = Path(__file__).resolve().parent.parent / "sql"


def _fresh_copy(pg_cluster: ThrowawayPostgres, template: str, name: str) -> str:
    dsn = pg_cluster.create_database(name, template=template)
    bootstrap(dsn)  # the copy's database ACL is PUBLIC's default: give it the real one
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgtap")
    return dsn


def test_pgtap_suite(pg_cluster: ThrowawayPostgres, migrated_template: str) -> None:
    """Every file on its own fresh copy of the migrated template.

    Files roll back, but their rows stay behind as dead tuples until autovacuum
    reaches them, and a vacuum that lands between two files leaves the next one
    tables whose statistics say "empty" — its generic plans then differ from a
    copy whose tables were never vacuumed. Plan-sensitive assertions (the rows a
    pull fetches, tests/sql/pull_offer.sql) must not depend on when autovacuum
    happened to pass during the suite, so no file sees another's leftovers.
    """
    pg_prove = shutil.which("pg_prove")
    assert pg_prove is not None, "pg_prove missing: install libtap-parser-sourcehandler-pgtap-perl"
    files = sorted(SQL_TESTS.glob("*.sql"))
    assert files, "no pgTAP test files found"
    # While working on one function: QL_PGTAP_ONLY=retry_run,prune_runs runs those files only.
    only = {name.strip() for name in os.environ.get("QL_PGTAP_ONLY", "").split(",") if name.strip()}
    if only:
        files = [path for path in files if path.stem in only]
        assert files, f"QL_PGTAP_ONLY names no file in tests/sql: {sorted(only)}"
    failed: list[str] = []
    assertions = 0
    for index, path in enumerate(files):
        name = f"ql_pgtap_{os.getpid()}_{index}"
        dsn = _fresh_copy(pg_cluster, migrated_template, name)
        try:
            info = psycopg.conninfo.conninfo_to_dict(dsn)
            cmd = [
                pg_prove,
                "--ext",
                ".sql",
                "--failures",
                "--comments",
                "-h",
                str(info["host"]),
                "-p",
                str(info["port"]),
                "-U",
                str(info["user"]),
                "-d",
                str(info["dbname"]),
                str(path),
            ]
            result = subprocess.run(cmd, capture_output=True, text=True, check=False,
                                    cwd=SQL_TESTS)  # fmt: skip
        finally:
            pg_cluster.drop_database(name)
        passed = result.returncode == 0 and "Result: PASS" in result.stdout
        found = re.search(r"Tests=(\d+)", result.stdout)
        assertions += int(found.group(1)) if found else 0
        if not passed:
            failed.append(path.name)
            print(result.stdout[-20000:])
            print(result.stderr[-5000:])
    print(f"pgTAP: {len(files)} files, {assertions} assertions, failed: {failed or 'none'}")
    assert not failed, f"pg_prove reported failures in {failed} (see output above)"
    assert assertions > len(files), "pg_prove ran no assertions"
