"""schemas.canonical.sha256_digest uses CPython's built-in SHA-256 when there is
one (to keep hashlib's OpenSSL digest table out of the edge worker); it must be
the very same function as hashlib's."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from qinglong.schemas.canonical import sha256_digest


def test_digest_equals_hashlib_sha256() -> None:
    for size in (0, 1, 55, 56, 63, 64, 65, 1000, 100_000):
        data = os.urandom(size)
        assert sha256_digest(data) == "sha256:" + hashlib.sha256(data).hexdigest()
    assert sha256_digest(b"abc") == (
        "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_worker_startup_digest_does_not_import_hashlib() -> None:
    code = (
        "import sys\n"
        "from qinglong.worker.config import capabilities_digest\n"
        "capabilities_digest({'schema': 'qinglong/worker-capabilities@v1',"
        " 'executors': ['remote-worker'], 'labels': {}, 'runtimes': {}, 'slots': 1})\n"
        "import qinglong.worker.coordinator, qinglong.worker.fsio, qinglong.worker.owner_lock\n"
        "print(sorted(m for m in ('hashlib', 'secrets', 'hmac', '_hashlib')"
        " if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
