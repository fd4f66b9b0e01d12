"""The real job in `qinglong demo` (SPEC §14, §15, §16.1): signed revisions, a
secret, masking and a followed live log.

* **Trust.** The demo creates its own Ed25519 signing key in its working
  directory (`signing/signing-key.pem`, 0600) and a JWKS holding its public key
  (`trust-keys.json`); every task it publishes is signed
  (`control_plane.publish_task(sign=…)`) and every worker runs with
  `--trust-keys trust-keys.json --trust-policy enforce`, so an unsigned or
  altered revision would never start.
* **Secret.** A KEK file (`kek.key`, 0600) is given to the ingress (`kekFile`);
  with an executor, the demo stores one secret of its project (`report-token`,
  a random value `demo-secret-…` that is never printed) and publishes the task
  `secret-report`, whose command reads it from `$REPORT_TOKEN`, prints it (the
  worker masks it: the log shows `[MASKED]`) and prints a few more lines over
  about 3 s.
* **Live log.** The demo follows that run's log through `ql.run_log` (its admin
  DSN, polled with its progress view) and prints each line as `  log | …`.
* **Leak check.** At the end it looks for the value in everything it can see:
  its own printed output, every file under its working and run directories
  (worker, ingress and audit logs, journals, run directories) and the run as
  stored (the live log, `admin run show`'s document) — and says where it was
  found, or that it was found nowhere. A finding fails the demo.

The secret task's run is one of the `--runs` (the first, enqueued in the first
wave with the highest priority): the totals stay the requested count.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from qinglong.demo import PROJECT, TaskSpec

if TYPE_CHECKING:
    from qinglong.log_text import LogPage
    from qinglong.schemas.signing import Signer
    from qinglong.service.compiler import CompiledRevision

SECRET_NAME = "report-token"
SECRET_ENV = "REPORT_TOKEN"
VALUE_PREFIX = "demo-secret-"  # the value is this + 32 random hex digits
LOG_PREFIX = "  log | "
MASK = "[MASKED]"
SIGNING_DIR = "signing"
JWKS_NAME = "trust-keys.json"
KEK_NAME = "kek.key"
SCAN_MAX_BYTES = 64 * 1024 * 1024  # a file larger than this is read in part

# Reads the secret from its environment, prints it (masked by the worker), and
# prints a few more lines over ~3 s: the demo follows them as they are stored.
REPORT_SCRIPT = f"""\
import os, time
token = os.environ[{SECRET_ENV!r}]
print('secret-report: {SECRET_ENV}=' + token, flush=True)
for step in ('collecting figures', 'rendering the report', 'uploading it'):
    time.sleep(1)
    print('secret-report: ' + step + ' (token of', len(token), 'characters)', flush=True)
print('secret-report: done', flush=True)
"""


@dataclass(frozen=True)
class SecretTaskSpec(TaskSpec):
    """`secret-report`: one run, anywhere, its command given the demo's secret."""

    def command(self) -> dict[str, Any]:
        return {
            "schema": "qinglong/command@v1",
            "argv": ["python3", "-c", REPORT_SCRIPT],
            "env": {},
            "timeoutS": 30,
            "secrets": {SECRET_ENV: SECRET_NAME},
        }


SECRET_TASK = SecretTaskSpec(
    "secret-report", 9, 0, None, f"anywhere; reads secret {SECRET_NAME} (printed masked)"
)


class RecordingOut:
    """The demo's output stream, remembered so the leak check can read it back."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def text(self) -> str:
        return "".join(self.parts)


@dataclass
class LogFollower:
    """One run's live log, read page by page (ql.run_log) and cut into lines."""

    run_id: str
    attempt: int | None = None
    offset: int = 0
    partial: str = ""
    text: str = ""  # everything read, for the leak check
    finished: bool = False

    def read(self, fetch: Callable[[str, int | None, int], LogPage]) -> list[str]:
        """New complete lines (all the rest once the attempt ended and all was read)."""
        page = fetch(self.run_id, self.attempt, self.offset)
        self.attempt, self.offset = page.attempt_number, page.next_offset
        self.text += page.text
        *lines, self.partial = (self.partial + page.text).split("\n")
        if page.finished:
            self.finished = True
            if self.partial:
                lines.append(self.partial)
            self.partial = ""
            tail = page.trailer()
            if tail is not None:
                lines.append(tail)
        return lines


@dataclass(frozen=True)
class Trust:
    """The demo's signing key and the JWKS its workers trust."""

    signer: Signer
    jwks_file: Path

    @classmethod
    def create(cls, root: Path) -> Trust:
        from qinglong.schemas.signing import Signer, create_signing_key

        made = create_signing_key(str(root / SIGNING_DIR))
        jwk = json.loads(Path(made["publicJwkFile"]).read_text(encoding="utf-8"))
        jwks_file = root / JWKS_NAME
        jwks_file.write_text(json.dumps({"keys": [jwk]}, indent=2) + "\n", encoding="utf-8")
        return cls(Signer.load(made["privateKeyFile"]), jwks_file)

    def sign_for(self, compiled: CompiledRevision) -> Callable[[str], str]:
        """task id -> the detached JWS of the revision (SPEC §16.1)."""
        from qinglong.schemas.signing import revision_payload

        def sign(task_id: str) -> str:
            return self.signer.sign(
                revision_payload(
                    task_id, compiled.kind, compiled.executor, compiled.spec, compiled.placement
                )
            )

        return sign


@dataclass
class DemoJob:
    """Trust, the KEK and (with an executor) the secret task of one demo."""

    root: Path
    trust: Trust
    kek_file: Path
    value: bytes = field(repr=False)  # never printed, logged or written by the demo
    enabled: bool = False  # with an executor: the secret is stored and its task runs
    task_id: str | None = None
    follower: LogFollower | None = None
    masked_lines: int = 0
    recorder: RecordingOut | None = None
    findings: list[str] = field(default_factory=list)
    scanned_files: int = 0

    @classmethod
    def create(cls, root: Path, kek_file: Path | None = None) -> DemoJob:
        """`kek_file`: the stack's KEK (qinglong.local_stack); None: a new one in root."""
        from qinglong.service.secrets_crypto import create_kek_file

        if kek_file is None:
            kek_file = root / KEK_NAME
            create_kek_file(kek_file)
        value = (VALUE_PREFIX + secrets.token_hex(16)).encode("ascii")
        return cls(root, Trust.create(root), kek_file, value)

    def record(self, out: IO[str]) -> RecordingOut:
        self.recorder = RecordingOut(out)
        return self.recorder

    # -- workers and publishing ------------------------------------------------

    def worker_args(self) -> list[str]:
        return ["--trust-keys", str(self.trust.jwks_file), "--trust-policy", "enforce"]

    def trust_line(self) -> str:
        return (
            f"every task is signed with the demo's key {self.trust.signer.kid[:12]}… "
            f"({SIGNING_DIR}/signing-key.pem, 0600); workers run with --trust-keys "
            f"{JWKS_NAME} --trust-policy enforce (an unsigned or altered revision never "
            "starts)"
        )

    def store_secret(self, conn: Any) -> str:
        """Store the demo project's secret; -> the line that says so (no value)."""
        from qinglong.service import secret_store
        from qinglong.service.secrets_crypto import load_kek

        stored = secret_store.set_secret(
            conn, load_kek(self.kek_file), PROJECT, SECRET_NAME, self.value
        )
        return (
            f"secret {SECRET_NAME} v{stored.version} stored encrypted (random value, "
            f"never printed; KEK {KEK_NAME} 0600, given to the ingress as kekFile)"
        )

    # -- following the log ------------------------------------------------------

    def poll(self, dsn: str) -> list[str]:
        """The secret run's new log lines, as the demo prints them (none when done)."""
        if not self.enabled or self.task_id is None or self.finished:
            return []
        from qinglong.db import api
        from qinglong.service import control_plane
        from qinglong.service.control_plane import ControlPlaneError

        with control_plane.connect(dsn) as conn:
            if self.follower is None:
                runs = control_plane.run(conn, api.list_runs(task_id=self.task_id, limit=1)).runs
                if not runs:
                    return []
                self.follower = LogFollower(str(runs[0]["runId"]))
            try:
                lines = self.follower.read(
                    lambda run, attempt, offset: control_plane.run(
                        conn, api.run_log(run_id=run, attempt_no=attempt, offset=offset)
                    )
                )
            except ControlPlaneError as exc:
                if exc.reason == "not_found":  # no attempt yet: not offered so far
                    return []
                raise
        self.masked_lines += sum(MASK in line for line in lines)
        return [LOG_PREFIX + line for line in lines]

    @property
    def finished(self) -> bool:
        return self.follower is not None and self.follower.finished

    # -- the leak check ----------------------------------------------------------

    def check(self, dsn: str, runs_root: Path) -> None:
        """Look for the value in the demo's output, its files and the stored run."""
        if not self.enabled:
            return
        if self.recorder is not None and self.value.decode() in self.recorder.text():
            self.findings.append("the demo's output")
        for path in _files(self.root, runs_root):
            self.scanned_files += 1
            if _holds(path, self.value):
                self.findings.append(str(path))
        if self.follower is not None:
            from qinglong.db import api
            from qinglong.service import control_plane

            with control_plane.connect(dsn) as conn:
                shown = json.dumps(
                    control_plane.run(conn, api.show_run(run_id=self.follower.run_id)).doc
                )
            if self.value.decode() in self.follower.text + shown:
                self.findings.append("the stored run (live log, attempts, events)")

    @property
    def leaked(self) -> bool:
        return bool(self.findings)

    def summary_lines(self) -> list[str]:
        if not self.enabled:
            return []
        logged = len(self.follower.text.encode()) if self.follower is not None else 0
        masked = (
            f"{self.masked_lines} followed log line(s) show {MASK}"
            if self.masked_lines
            else f"WARNING: no followed log line showed {MASK}"
        )
        where = ("FOUND in: " + ", ".join(self.findings)) if self.findings else "found nowhere"
        return [
            f"  secret-report: {masked}; the live log ({logged} bytes) was followed while it ran",
            f"  secret value {where} (checked: the demo's output, {self.scanned_files} "
            "files under its working and run directories, the stored run)",
        ]


def _files(*roots: Path) -> Iterator[Path]:
    for root in roots:
        for folder, _dirs, names in os.walk(root):
            for name in names:
                path = Path(folder) / name
                if path.is_file() and not path.is_symlink():
                    yield path


def _holds(path: Path, value: bytes) -> bool:
    try:
        with open(path, "rb") as handle:
            return value in handle.read(SCAN_MAX_BYTES)
    except OSError:
        return False
