"""`db/schema.sql`: the schema all migrations + functions produce, as pg_dump sees it.

The committed file lets a DBA review the whole schema in one place; CI migrates
a fresh database, dumps it again and diffs (tests/py/test_schema_dump.py).
Regenerate with `python -m tools.schema_dump` after changing db/.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "db" / "schema.sql"
PG_DUMP = "/usr/lib/postgresql/15/bin/pg_dump"
# Lines that vary by server/pg_dump build, not by our schema.
_VOLATILE = re.compile(r"^-- Dumped (from|by) |^\\(un)?restrict ")


def dump_schema(dsn: str) -> str:
    info = conninfo_to_dict(dsn)
    cmd = [
        PG_DUMP,
        "--schema-only",
        "--schema=ql",
        "--schema=ql_private",
        "-h",
        str(info["host"]),
        "-p",
        str(info.get("port", 5432)),
        "-U",
        str(info["user"]),
        str(info["dbname"]),
    ]
    # A password goes to pg_dump by environment, never on its command line.
    env = os.environ | ({"PGPASSWORD": str(info["password"])} if info.get("password") else {})
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    return normalize(out)


def normalize(text: str) -> str:
    lines = [line for line in text.splitlines() if not _VOLATILE.match(line)]
    return "\n".join(lines).strip() + "\n"


def main() -> int:
    from qinglong.db.migrator import migrate
    from qinglong.throwaway_postgres import throwaway_postgres

    with throwaway_postgres() as cluster:
        dsn = cluster.create_database("ql_schema_dump")
        migrate(dsn)
        SCHEMA_FILE.write_text(dump_schema(dsn), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
