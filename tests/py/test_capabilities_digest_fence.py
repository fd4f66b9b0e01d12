"""A pull is served only while the session's stored capabilities still hash to
their digest (docs/CONTRACT.md §3.2, QL014): a session row whose canonical bytes
were changed behind the functions' back is refused, and nothing is written."""

from __future__ import annotations

import psycopg
import pytest

from tests.py.provision import Intent, Provisioner, table_fingerprint


@pytest.mark.parametrize("tamper", [
    "capabilities_canonical = capabilities_canonical || ' '::bytea",  # bytes changed
    "capabilities_digest = 'sha256:' || repeat('0', 64)",  # digest changed
])  # fmt: skip
def test_a_session_whose_stored_capabilities_no_longer_hash_is_refused(
        db_dsn: str, tamper: str) -> None:  # fmt: skip
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        prov = Provisioner(conn)
        session = prov.session(prov.worker("w"))
        prov.enqueue(prov.task("t"), 2)
        conn.execute(f"UPDATE ql_private.worker_sessions SET {tamper} WHERE session_id = %s",
                     (session.session_id,))  # fmt: skip
        before = table_fingerprint(conn)
        with pytest.raises(psycopg.Error) as refused:
            prov.pull(session, Intent())
        assert refused.value.sqlstate == "QL014", refused.value
        assert table_fingerprint(conn) == before  # no lease, no event, no audit row
