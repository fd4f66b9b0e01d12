"""`qinglong db migrate|status`: thin CLI over db.migrator, printing JSON."""

from __future__ import annotations

import argparse
import json
import sys

from qinglong.db.migrator import MigrationError, migrate, status


def migrate_command(args: argparse.Namespace) -> int:
    try:
        result = migrate(args.dsn, dry_run=args.dry_run)
    except MigrationError as exc:
        print(json.dumps({"error": "migration_refused", "detail": str(exc)}), file=sys.stderr)
        return 2
    print(json.dumps(result.as_json()))
    return 0


def status_command(args: argparse.Namespace) -> int:
    rows = status(args.dsn)
    print(json.dumps({"migrations": [row.as_json() for row in rows]}))
    return 1 if any(row.state in ("modified", "missing") for row in rows) else 0
