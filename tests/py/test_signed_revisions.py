"""Signed revisions (SPEC §16.1): the signing code against `cryptography` as the
reference, `admin signing-key create`, `admin task publish --sign-key` against a
real database, and the worker's trust settings. The enforcing worker end to end
is tests/py/test_signed_revisions_e2e.py."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from qinglong.schemas import signing
from qinglong.schemas.canonical import canonical_bytes
from qinglong.worker.config import ConfigError, load_config_file
from qinglong.worker.trust import RevisionTrust, TrustError, TrustPolicy, TrustSettings
from tests.py.test_admin_cli import fails, ok

COMMAND = {"schema": "qinglong/command@v1", "argv": ["echo", "hi"], "env": {}, "timeoutS": 30}
TASK_ID = "6f1c2a0e-8a4b-4c1e-9d2f-0b7e5a3c9d11"


def b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def revision(spec: dict[str, Any] | None = None, placement: Any = None,
             signature: Any = None) -> dict[str, Any]:  # fmt: skip
    rev = {"taskId": TASK_ID, "kind": "qinglong/command@v1", "executor": "remote_worker",
           "spec": spec or dict(COMMAND), "signature": signature}  # fmt: skip
    if placement is not None:
        rev["placement"] = placement
    return rev


def signed(key: Ed25519PrivateKey, rev: dict[str, Any]) -> dict[str, Any]:
    kid = signing.kid_of(key.public_key())
    payload = signing.revision_payload(rev["taskId"], rev["kind"], rev["executor"], rev["spec"],
                                       rev.get("placement"))  # fmt: skip
    return dict(rev, signature={"kid": kid, "jws": signing.sign_detached(key, kid, payload)})


def trust_of(*keys: Ed25519PrivateKey, policy: TrustPolicy = TrustPolicy.ENFORCE) -> RevisionTrust:
    jwks = {"keys": [signing.public_jwk(k.public_key()) for k in keys]}
    return RevisionTrust(policy, signing.TrustKeys.from_jwks(jwks, "test"))


# ------------------------------------------------------------- the signing code


def test_kid_is_the_rfc7638_thumbprint_of_rfc8037s_example_key() -> None:
    # RFC 8037 appendix A.1/A.3: the Ed25519 example key and its JWK thumbprint.
    d = b64d("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
    key = Ed25519PrivateKey.from_private_bytes(d)
    x = signing.public_jwk(key.public_key())["x"]
    assert x == "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
    assert signing.kid_of(key.public_key()) == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def test_signature_is_a_detached_compact_jws_checked_by_cryptography() -> None:
    key = Ed25519PrivateKey.generate()
    rev = signed(key, revision(placement={"required": {"executors": ["remote-worker"],
                                                       "labels": {}, "runtimes": {}},
                                          "preferred": []}))  # fmt: skip
    header_b64, empty, sig_b64 = rev["signature"]["jws"].split(".")
    assert empty == ""  # detached: no payload part
    assert json.loads(b64d(header_b64)) == {"alg": "EdDSA", "kid": rev["signature"]["kid"]}
    # The payload: RFC 8785 of {taskId, kind, executor, spec, placement}.
    payload = canonical_bytes({k: rev[k] for k in ("taskId", "kind", "executor", "spec",
                                                    "placement")})  # fmt: skip
    signing_input = header_b64.encode() + b"." + base64.urlsafe_b64encode(payload).rstrip(b"=")
    key.public_key().verify(b64d(sig_b64), signing_input)  # the reference: raises if wrong
    with pytest.raises(InvalidSignature):
        key.public_key().verify(b64d(sig_b64), signing_input + b"x")


def test_placement_absent_is_omitted_from_the_payload() -> None:
    payload = signing.revision_payload(TASK_ID, "k", "e", {"a": 1}, None)
    assert json.loads(payload) == {"taskId": TASK_ID, "kind": "k", "executor": "e",
                                   "spec": {"a": 1}}  # fmt: skip


def test_verify_accepts_a_signature_made_by_cryptography_directly() -> None:
    key = Ed25519PrivateKey.generate()
    kid = signing.kid_of(key.public_key())
    rev = revision()
    header = base64.urlsafe_b64encode(json.dumps({"kid": kid, "alg": "EdDSA"}).encode())
    header_b64 = header.rstrip(b"=").decode()
    payload = canonical_bytes({k: rev[k] for k in ("taskId", "kind", "executor", "spec")})
    sig = key.sign(f"{header_b64}.".encode() + base64.urlsafe_b64encode(payload).rstrip(b"="))
    jws = f"{header_b64}..{base64.urlsafe_b64encode(sig).rstrip(b'=').decode()}"
    assert trust_of(key).check(dict(rev, signature={"kid": kid, "jws": jws})).ok


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda rev, other: dict(rev, signature=None), "unsigned"),
        (lambda rev, other: signed(other, rev), "unknown_kid"),
        (
            lambda rev, other: dict(rev, spec=dict(rev["spec"], argv=["rm", "-rf", "/"])),
            "bad_signature",
        ),
        (
            lambda rev, other: dict(rev, taskId="00000000-0000-4000-8000-000000000000"),
            "bad_signature",
        ),
        (
            lambda rev, other: dict(rev, placement={"required": {"executors": ["x"]}}),
            "bad_signature",
        ),
        (
            lambda rev, other: dict(rev, signature=dict(rev["signature"], kid="someone-else")),
            "kid_mismatch",
        ),
        (lambda rev, other: dict(rev, signature={"kid": "k", "jws": "e30..AAAA"}), "malformed"),
        (
            lambda rev, other: dict(
                rev,
                signature=dict(
                    rev["signature"], jws=rev["signature"]["jws"].replace("..", ".e30.", 1)
                ),
            ),
            "malformed",
        ),
    ],
    ids=[
        "unsigned",
        "untrusted_key",
        "spec_edited",
        "task_changed",
        "placement_added",
        "kid_field_lies",
        "short_signature",
        "attached_payload",
    ],
)
def test_enforce_refuses_every_revision_that_is_not_signed_by_a_trusted_key(edit, reason) -> None:
    trusted, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    good = signed(trusted, revision())
    trust = trust_of(trusted)
    assert trust.check(good).ok
    verdict = trust.check(edit(good, other))
    assert (verdict.ok, verdict.reason) == (False, reason)
    assert trust.refuses(verdict)


def test_several_trusted_keys_at_once_rotation() -> None:
    old, new = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    both = trust_of(old, new)
    assert both.check(signed(old, revision())).kid == signing.kid_of(old.public_key())
    assert both.check(signed(new, revision())).kid == signing.kid_of(new.public_key())
    assert not trust_of(new).check(signed(old, revision())).ok  # old key dropped


def test_warn_reports_but_does_not_refuse_and_off_checks_nothing() -> None:
    key = Ed25519PrivateKey.generate()
    unsigned = revision()
    warn = trust_of(key, policy=TrustPolicy.WARN)
    verdict = warn.check(unsigned)
    assert (verdict.ok, verdict.reason, warn.refuses(verdict)) == (False, "unsigned", False)
    assert RevisionTrust(TrustPolicy.OFF, None).check(unsigned).ok
    no_keys = RevisionTrust(TrustPolicy.WARN, None).check(signed(key, unsigned))
    assert (no_keys.ok, no_keys.reason) == (False, "unknown_kid")


def test_jwks_refuses_private_keys_wrong_curves_and_lying_kids(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    jwk = signing.public_jwk(key.public_key())
    d = key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                          serialization.NoEncryption())  # fmt: skip
    for bad in ({"keys": []}, {"keys": [dict(jwk, crv="X25519")]},
                {"keys": [dict(jwk, d=base64.urlsafe_b64encode(d).decode())]},
                {"keys": [dict(jwk, kid="not-its-thumbprint")]},
                {"keys": [dict(jwk, x="AAAA")]}, [jwk]):  # fmt: skip
        with pytest.raises(signing.KeyFileError):
            signing.TrustKeys.from_jwks(bad, "test")
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [jwk]}))
    assert signing.TrustKeys.load(str(path)).kids == (jwk["kid"],)


# ------------------------------------------------------- admin signing-key create


def test_signing_key_create_writes_pkcs8_0600_and_the_public_jwk(tmp_path: Path) -> None:
    out = ok("signing-key", "create", "--out", str(tmp_path / "keys"))  # no --dsn: no database
    assert set(out) == {"kid", "privateKeyFile", "publicJwkFile"}
    pem = Path(out["privateKeyFile"])
    assert pem.name == "signing-key.pem" and stat.S_IMODE(pem.stat().st_mode) == 0o600
    key = serialization.load_pem_private_key(pem.read_bytes(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    assert pem.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8
    jwk = json.loads(Path(out["publicJwkFile"]).read_text())
    assert Path(out["publicJwkFile"]).name == "signing-key.jwk.json"
    assert set(jwk) == {"kty", "crv", "x", "kid"} and jwk["kty"] == "OKP"
    assert jwk["crv"] == "Ed25519" and jwk["kid"] == out["kid"]
    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)  # fmt: skip
    assert b64d(jwk["x"]) == raw
    thumb = hashlib.sha256(json.dumps({"crv": "Ed25519", "kty": "OKP", "x": jwk["x"]},
                                      separators=(",", ":")).encode()).digest()  # fmt: skip
    assert b64d(jwk["kid"]) == thumb
    # Never overwritten.
    again = fails("signing-key", "create", "--out", str(tmp_path / "keys"))
    assert again["reason"] == "key_exists" and again["field"] == "out"
    assert serialization.load_pem_private_key(pem.read_bytes(), None).private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
        serialization.NoEncryption()) == key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
        serialization.NoEncryption())  # fmt: skip


# ------------------------------------------------------- admin task publish --sign-key


def _publish(dsn: str, command_file: Path, *extra: str, name: str = "signed") -> dict[str, Any]:
    return ok("task", "publish", "--dsn", dsn, "--project", "sig", "--name", name,
              "--command-file", str(command_file), *extra)  # fmt: skip


def _stored(dsn: str, revision_id: str) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT task_id::text, kind, executor, spec, placement, signature_kid, signature_jws"
            " FROM ql_private.execution_revisions WHERE id = %s",
            (revision_id,),
        ).fetchone()
    assert row is not None
    task_id, kind, executor, spec, placement, kid, jws = row
    return {"taskId": task_id, "kind": kind, "executor": executor, "spec": spec,
            "placement": placement,
            "signature": None if jws is None else {"kid": kid, "jws": jws}}  # fmt: skip


def test_publish_sign_key_stores_a_signature_over_the_stored_revision(
    db_dsn: str, tmp_path: Path
) -> None:
    keys = ok("signing-key", "create", "--out", str(tmp_path / "k"))
    command = tmp_path / "command.json"
    placement = {"required": {"labels": {"os": "linux"}}}
    command.write_text(json.dumps(dict(COMMAND, placement=placement)))
    first = _publish(db_dsn, command, "--sign-key", keys["privateKeyFile"])
    assert first["signatureKid"] == keys["kid"] and first["revision"] == 1
    rev = _stored(db_dsn, first["revisionId"])
    assert rev["taskId"] == first["taskId"]  # a new task: its id was known before signing
    public = Ed25519PublicKey.from_public_bytes(
        b64d(json.loads(Path(keys["publicJwkFile"]).read_text())["x"])
    )
    header_b64, _, sig_b64 = rev["signature"]["jws"].split(".")
    payload = canonical_bytes({k: rev[k] for k in ("taskId", "kind", "executor", "spec",
                                                    "placement")})  # fmt: skip
    public.verify(b64d(sig_b64), header_b64.encode() + b"."
                  + base64.urlsafe_b64encode(payload).rstrip(b"="))  # fmt: skip

    # Dedupe: the same signed content -> the same revision; an unsigned re-publish
    # keeps the signed revision; a new key -> a new revision (revisions never change).
    assert _publish(db_dsn, command, "--sign-key", keys["privateKeyFile"]) == first
    assert _publish(db_dsn, command) == first
    other = ok("signing-key", "create", "--out", str(tmp_path / "k2"))
    resigned = _publish(db_dsn, command, "--sign-key", other["privateKeyFile"])
    assert (resigned["revision"], resigned["signatureKid"]) == (2, other["kid"])


def test_signing_unsigned_identical_content_makes_a_new_revision(
    db_dsn: str, tmp_path: Path
) -> None:
    keys = ok("signing-key", "create", "--out", str(tmp_path / "k"))
    command = tmp_path / "command.json"
    command.write_text(json.dumps(COMMAND))
    unsigned = _publish(db_dsn, command, name="later-signed")
    signed_doc = _publish(db_dsn, command, "--sign-key", keys["privateKeyFile"],
                          name="later-signed")  # fmt: skip
    assert unsigned["signatureKid"] is None
    assert signed_doc["revision"] == unsigned["revision"] + 1
    assert signed_doc["contentDigest"] == unsigned["contentDigest"]
    assert _stored(db_dsn, unsigned["revisionId"])["signature"] is None  # never changed


def test_publish_with_an_unusable_key_changes_nothing(db_dsn: str, tmp_path: Path) -> None:
    command = tmp_path / "command.json"
    command.write_text(json.dumps(COMMAND))
    not_a_key = tmp_path / "key.pem"
    not_a_key.write_text("not a key\n")
    rsa_like = tmp_path / "missing.pem"
    for path, reason in ((not_a_key, "invalid_sign_key"), (rsa_like, "sign_key_unreadable")):
        doc = fails("task", "publish", "--dsn", db_dsn, "--project", "sig", "--name", "nokey",
                    "--command-file", str(command), "--sign-key", str(path))  # fmt: skip
        assert (doc["field"], doc["reason"]) == ("signKey", reason)
    with psycopg.connect(db_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM ql_private.tasks WHERE name = 'nokey'"
                            ).fetchone() == (0,)  # fmt: skip


# ------------------------------------------------------------ worker trust settings


def _config(tmp_path: Path, trust: Any) -> Path:
    doc = {"ingressUrl": "https://127.0.0.1:8443", "workerId": TASK_ID, "certFile": "c.pem",
           "keyFile": "k.pem", "caFile": "ca.pem", "credentialFile": "cred",
           "journal": str(tmp_path / "journal")}  # fmt: skip
    if trust is not None:
        doc["trust"] = trust
    path = tmp_path / "worker.json"
    path.write_text(json.dumps(doc))
    return path


def test_worker_trust_setting_defaults_to_warn_and_resolves_the_keys_file(tmp_path: Path) -> None:
    assert load_config_file(str(_config(tmp_path, None)), journal=None,
                            slots=None).trust == TrustSettings()  # fmt: skip
    assert TrustSettings().policy is TrustPolicy.WARN
    config = load_config_file(str(_config(tmp_path, {"keysFile": "keys.json",
                                                     "policy": "enforce"})),
                              journal=None, slots=None)  # fmt: skip
    assert config.trust.keys_file == os.path.join(str(tmp_path), "keys.json")
    assert config.trust.policy is TrustPolicy.ENFORCE
    for bad in ({"policy": "strict"}, {"keys": "x"}, "enforce"):
        with pytest.raises(ConfigError):
            load_config_file(str(_config(tmp_path, bad)), journal=None, slots=None)


def test_enforce_without_keys_or_with_a_bad_keys_file_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(TrustError):
        RevisionTrust.load(TrustSettings(TrustPolicy.ENFORCE, None))
    bad = tmp_path / "keys.json"
    bad.write_text("{}")
    for policy in (TrustPolicy.ENFORCE, TrustPolicy.WARN):
        with pytest.raises(TrustError):
            RevisionTrust.load(TrustSettings(policy, str(bad)))
    assert RevisionTrust.load(TrustSettings(TrustPolicy.OFF, str(bad))).keys is None


# ------------------------------------------------------------------ the wire contract


def test_offer_schema_carries_the_signature_kid_and_jws_or_null() -> None:
    from tests.py.test_contract import offered, reject, validate

    sid = "qinglong/remote-execution-offer@v1"
    key = Ed25519PrivateKey.generate()
    doc = offered()
    validate(sid, doc)  # absent: an offer of an older ingress
    doc["executionRevision"]["signature"] = None
    validate(sid, doc)
    good = signed(key, revision())["signature"]
    doc["executionRevision"]["signature"] = good
    validate(sid, doc)
    for bad in ({"kid": good["kid"]}, dict(good, extra=1), dict(good, kid="a b"),
                dict(good, jws=good["jws"].replace("..", ".e30.", 1)), good["jws"]):  # fmt: skip
        doc["executionRevision"]["signature"] = bad
        reject(sid, doc)
