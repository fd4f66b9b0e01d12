"""No function the ingress can call takes a time argument (docs/CONTRACT.md §3):
every time comes from the database's own clock_timestamp(), so a worker cannot
move a lease's clock. Checked from the catalog, with a planted positive control."""

from __future__ import annotations

import psycopg

TIME_TYPES = ("timestamp with time zone", "timestamp without time zone", "date",
              "time with time zone", "time without time zone", "interval")  # fmt: skip
INGRESS_ROLE = "ql_worker_ingress"


def time_arguments(conn: psycopg.Connection) -> list[str]:
    """`function(argument type)` of every ql. function the ingress role may execute
    that takes a time-typed argument."""
    rows = conn.execute(
        "SELECT p.proname, format_type(t, NULL)"
        "  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace,"
        "       unnest(p.proargtypes::oid[]) AS t"
        " WHERE n.nspname = 'ql' AND has_function_privilege(%s, p.oid, 'EXECUTE')"
        "   AND format_type(t, NULL) = ANY(%s)",
        (INGRESS_ROLE, list(TIME_TYPES)),
    ).fetchall()
    return sorted(f"{name}({kind})" for name, kind in rows)


def test_no_ingress_callable_function_takes_a_time_argument(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        callable_count = conn.execute(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'ql' AND has_function_privilege(%s, p.oid, 'EXECUTE')",
            (INGRESS_ROLE,)).fetchone()  # fmt: skip
        assert callable_count is not None and callable_count[0] >= 10  # the check saw them
        assert time_arguments(conn) == []


def test_the_check_finds_a_planted_time_argument(db_dsn: str) -> None:
    with psycopg.connect(db_dsn) as conn:  # rolled back at the end
        conn.execute(
            "CREATE FUNCTION ql.planted_clock(p_at timestamptz) RETURNS int"
            " LANGUAGE sql AS 'SELECT 1'"
        )
        conn.execute(f"GRANT EXECUTE ON FUNCTION ql.planted_clock(timestamptz) TO {INGRESS_ROLE}")
        assert time_arguments(conn) == ["planted_clock(timestamp with time zone)"]
        conn.rollback()
