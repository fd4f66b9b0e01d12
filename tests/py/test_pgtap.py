"""Runs the pgTAP suite (tests/sql/*.sql) with pg_prove against a migrated database.

Each .sql file runs in its own transaction and rolls back; fixtures live in
tests/sql/*.psql, which pg_prove does not pick up (`--ext .sql`).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest

from qinglong.throwaway_postgres import ThrowawayPostgres

SQL_TESTS = Path(__file__).resolve().parent.parent / "sql"


@pytest.fixture
def pgtap_dsn(pg_cluster: ThrowawayPostgres, db_name: str) -> str:
    dsn = pg_cluster.dsn(db_name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgtap")
    return dsn


def test_pgtap_suite(pgtap_dsn: str) -> None:
    pg_prove = shutil.which("pg_prove")
    assert pg_prove is not None, "pg_prove missing: install libtap-parser-sourcehandler-pgtap-perl"
    files = sorted(SQL_TESTS.glob("*.sql"))
    assert files, "no pgTAP test files found"
    info = psycopg.conninfo.conninfo_to_dict(pgtap_dsn)
    cmd = [
        pg_prove, "--ext", ".sql", "--failures", "--comments",
        "-h", str(info["host"]), "-p", str(info["port"]),
        "-U", str(info["user"]), "-d", str(info["dbname"]),
        *[str(f) for f in files],
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=SQL_TESTS)
    print(result.stdout[-20000:])
    print(result.stderr[-5000:])
    assert result.returncode == 0, "pg_prove reported failures (see output above)"
    assert "Result: PASS" in result.stdout
