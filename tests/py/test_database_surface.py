"""The database surface (db/bootstrap.sql): who may connect, create temporary
objects and so reach LISTEN/NOTIFY on `ql_dispatch`.

Real PostgreSQL. CREATE DATABASE ... TEMPLATE does not copy a database's ACL,
so every test first runs `migrate` (which re-runs the bootstrap) on its own copy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import make_conninfo

from qinglong.db.migrator import migrate
from qinglong.throwaway_postgres import ThrowawayPostgres

PROJECT_ROLES = (
    "ql_owner",
    "ql_runtime",
    "ql_worker_ingress",
    "ql_readonly",
    "ql_sweeper",
    "ql_producer",
)


@pytest.fixture
def bootstrapped(db_dsn: str) -> str:
    migrate(db_dsn)
    return db_dsn


@pytest.fixture
def outsider(pg_cluster: ThrowawayPostgres, db_name: str) -> Iterator[str]:
    """A login that is a member of no project role (only of a group of its own)."""
    group = f"ql_test_unrelated_{os.getpid()}"
    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "DO $$BEGIN CREATE ROLE {} NOLOGIN; EXCEPTION WHEN duplicate_object"
                " THEN NULL; END$$"
            ).format(sql.Identifier(group))
        )
    yield pg_cluster.ensure_login_role(f"{group}_login", group, db_name)


def _database_acl(conn: psycopg.Connection) -> set[tuple[str, str]]:
    rows = conn.execute(
        "SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,"
        "       a.privilege_type"
        "  FROM pg_catalog.pg_database d"
        "  CROSS JOIN LATERAL pg_catalog.aclexplode(d.datacl) a"
        " WHERE d.datname = pg_catalog.current_database()"
        "   AND a.grantee <> d.datdba"
    ).fetchall()
    return {(str(grantee), str(privilege)) for grantee, privilege in rows}


def test_bootstrap_grants_connect_to_the_project_roles_only(bootstrapped: str) -> None:
    with psycopg.connect(bootstrapped) as conn:
        assert _database_acl(conn) == {
            ("ql_owner", "CONNECT"),
            ("ql_owner", "CREATE"),
            ("ql_owner", "TEMPORARY"),
            ("ql_runtime", "CONNECT"),
            ("ql_worker_ingress", "CONNECT"),
            ("ql_readonly", "CONNECT"),
            ("ql_sweeper", "CONNECT"),
            ("ql_producer", "CONNECT"),
        }


def test_unrelated_login_cannot_connect_so_cannot_listen(
    bootstrapped: str, outsider: str, db_dsn: str
) -> None:
    # Before the revoke an arbitrary login could LISTEN on ql_dispatch: the control.
    with psycopg.connect(db_dsn, autocommit=True) as su:
        su.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO PUBLIC").format(sql.Identifier(su.info.dbname))
        )
    with psycopg.connect(outsider, autocommit=True) as conn:
        conn.execute("LISTEN ql_dispatch")
    migrate(bootstrapped)  # the bootstrap closes it again on every migrate
    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        psycopg.connect(outsider, autocommit=True).close()


def test_project_logins_connect_but_create_no_temporary_objects(
    bootstrapped: str, pg_cluster: ThrowawayPostgres, db_name: str
) -> None:
    for group in ("ql_runtime", "ql_worker_ingress", "ql_readonly", "ql_sweeper", "ql_producer"):
        dsn = pg_cluster.ensure_login_role(f"ql_test_{group}_{os.getpid()}", group, db_name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute("CREATE TEMPORARY TABLE shadow (x int)")


def test_bootstrap_ignores_a_session_search_path_that_shadows_catalog_functions(
    db_dsn: str,
) -> None:
    """A migrating session whose search_path puts `public` before pg_catalog (and a
    public.current_database() pointing elsewhere) still closes its own database."""
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION public.current_database() RETURNS name"
            " LANGUAGE sql AS $$SELECT 'postgres'::name$$"
        )
        conn.execute(
            "CREATE FUNCTION public.format(text, name) RETURNS text"
            " LANGUAGE sql AS $$SELECT 'SELECT 1'$$"
        )
    migrate(make_conninfo(db_dsn, options="-c search_path=public,pg_catalog"))
    with psycopg.connect(db_dsn) as conn:
        acl = _database_acl(conn)
    assert not {grant for grant in acl if grant[0] == "PUBLIC"}, acl
    assert ("ql_readonly", "CONNECT") in acl
