"""Unit tests of the ingress's small parts (no network, no database)."""

from __future__ import annotations

import json
import uuid

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from qinglong.schemas.contract import ContractError, SchemaId, default_contract
from qinglong.service import pki
from qinglong.service.audit import AuditLog, AuditRecord, Outcome
from qinglong.service.config import ConfigError, load_config
from qinglong.service.credentials import CredentialProblem, parse_authorization
from qinglong.service.errors import error_body
from qinglong.service.gateway import connection_kwargs
from qinglong.service.identity import PeerIdentities
from qinglong.service.idle_answer import IdleAnswers, encode, idle_body
from qinglong.service.idle_view import IDLE_RESULT
from qinglong.service.metrics import Counter, Histogram
from qinglong.service.pki import generate_credential, secret_digest
from qinglong.service.ratelimit import TokenBucketLimiter

REQUIRED = {"dsn": "host=x", "certFile": "s.pem", "keyFile": "s.key", "clientCaFile": "ca.pem"}


def _write(tmp_path, doc) -> str:
    path = tmp_path / "ingress.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_config_file_env_overrides_and_relative_paths(tmp_path):
    path = _write(tmp_path, {**REQUIRED, "port": 9443, "prepare_threshold": 0})
    config = load_config(
        path,
        environ={
            "QL_INGRESS_PORT": "0",
            "QL_INGRESS_PREPARE_THRESHOLD": "null",
            "QL_INGRESS_RATE_PER_S": "2.5",
        },
    )
    assert config.port == 0 and config.prepare_threshold is None and config.rate_per_s == 2.5
    assert config.cert_file == str(tmp_path / "s.pem")
    assert connection_kwargs(config)["prepare_threshold"] is None
    assert connection_kwargs(config)["autocommit"] is True
    assert "statement_timeout=3000" in connection_kwargs(config)["options"]


@pytest.mark.parametrize(
    "doc,env",
    [
        ({**REQUIRED, "prot": 1}, {}),
        ({**REQUIRED, "port": "x"}, {}),
        ({**REQUIRED, "maxBodyBytes": 8192}, {}),
        ({"dsn": "host=x"}, {}),
        (REQUIRED, {"QL_INGRESS_NOPE": "1"}),
        (REQUIRED, {"QL_INGRESS_STATEMENT_TIMEOUT_MODE": "sometimes"}),
    ],
)
def test_config_refusals(tmp_path, doc, env):
    with pytest.raises(ConfigError):
        load_config(_write(tmp_path, doc), environ=env)


def test_authorization_parsing_hashes_the_secret_in_process():
    cred = generate_credential()
    ok = parse_authorization(f"Bearer {cred.token}")
    assert ok.problem is None and ok.credential is not None
    assert ok.credential.credential_id == cred.credential_id
    assert ok.credential.secret_digest == secret_digest(cred.secret)
    assert cred.secret not in repr(ok)
    assert parse_authorization(None).problem is CredentialProblem.MISSING
    assert parse_authorization("").problem is CredentialProblem.MISSING
    for bad in (
        cred.token,
        f"Basic {cred.token}",
        f"Bearer {cred.token}x",
        f"Bearer {cred.token[:-1]}B",
        "Bearer ql3w_short_x",
        f"Bearer  {cred.token}",
    ):
        result = parse_authorization(bad)
        assert result.problem is CredentialProblem.MALFORMED, bad
    assert parse_authorization(f"Bearer {cred.token}x").credential_id == cred.credential_id


def test_token_bucket_refills_and_bounds_its_table():
    now = [0.0]
    limiter = TokenBucketLimiter(rate_per_s=1.0, burst=2, max_tracked=3, clock=lambda: now[0])
    assert [limiter.take("a").allowed for _ in range(3)] == [True, True, False]
    assert limiter.take("a").retry_after_s == 1
    now[0] += 1.0
    assert limiter.take("a").allowed
    for key in "bcde":
        limiter.take(key)
    assert len(limiter) == 3


def test_metrics_exposition_format():
    counter = Counter("c_total", "help", ("route",))
    counter.inc("/x")
    counter.inc("/x", amount=2)
    hist = Histogram("h_seconds", "help", ("route",), buckets=(0.1, 1.0))
    hist.observe(0.05, "/x")
    hist.observe(0.5, "/x")
    text = "\n".join(counter.render() + hist.render())
    assert 'c_total{route="/x"} 3' in text
    assert 'h_seconds_bucket{route="/x",le="0.1"} 1' in text
    assert 'h_seconds_bucket{route="/x",le="1"} 2' in text
    assert 'h_seconds_bucket{route="/x",le="+Inf"} 2' in text
    assert 'h_seconds_count{route="/x"} 2' in text


def test_audit_lines_have_exactly_the_low_sensitivity_fields():
    lines: list[str] = []
    AuditLog(lines.append).record(
        AuditRecord("offer.pull", Outcome.DENIED, "bad_secret", "abcdefghijklmnop", None)
    )
    doc = json.loads(lines[0])
    assert set(doc) == {
        "timeMs",
        "stream",
        "credentialId",
        "workerId",
        "action",
        "outcome",
        "reason",
    }
    assert doc["outcome"] == "denied"


def test_error_body_shape():
    assert json.loads(error_body(409, "token_mismatch")) == {
        "schema": "qinglong/error@v1",
        "error": "conflict",
        "reason": "token_mismatch",
    }


def test_config_accepts_the_nested_dev_layout(tmp_path):
    nested = {
        "listen": {"host": "127.0.0.1", "port": 18443},
        "admin": {"host": "127.0.0.1", "port": 19464},
        "dsn": "host=x",
        "tls": {"certFile": "s.pem", "keyFile": "s.key", "workerCaFile": "ca.pem"},
        "database": {
            "poolMin": 1,
            "poolMax": 8,
            "statementTimeoutMs": 2000,
            "preparedStatements": False,
        },
        "limits": {
            "ratePerSecond": 50,
            "burst": 100,
            "maxConnections": 1024,
            "headerTimeoutS": 10,
            "bodyTimeoutS": 10,
        },
        "auditLog": "stderr",
    }
    config = load_config(_write(tmp_path, nested), environ={})
    assert (config.port, config.admin_port, config.pool_max_size) == (18443, 19464, 8)
    assert config.client_ca_file == str(tmp_path / "ca.pem")
    assert config.prepare_threshold is None and config.rate_burst == 100
    assert config.max_connections == 1024 and config.statement_timeout_ms == 2000


def test_peer_identities_answer_what_the_certificate_names_and_stay_bounded(tmp_path):
    ca = tmp_path / "ca"
    pki.init_ca(ca)
    workers = [str(uuid.uuid4()) for _ in range(3)]
    ders = [_der(pki.issue_worker_cert(ca, tmp_path / w, w).cert_file) for w in workers]
    server = _der(pki.issue_server_cert(ca, tmp_path / "server").cert_file)
    peers = PeerIdentities(max_entries=2)
    for _ in range(2):  # the second round answers from the cache, the same way
        assert [peers.worker_id(der) for der in ders[:2]] == workers[:2]
    assert peers.worker_id(server) is None  # names no worker: refused, and cached as such
    assert peers.worker_id(server) is None
    assert len(peers) == 2
    # Re-issued for another worker: other bytes, another answer (never the old one).
    assert peers.worker_id(ders[2]) == workers[2]
    assert peers.worker_id(ders[0]) == workers[0] and len(peers) == 2


def _der(cert_file) -> bytes:
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    return cert.public_bytes(serialization.Encoding.DER)


def test_idle_answers_are_the_bytes_the_generic_path_sends():
    answers = IdleAnswers(IDLE_RESULT, max_entries=3)
    for retry_ms in (0, 2000, 2500, 3000, 2000):
        body = answers.body(retry_ms)
        doc = json.loads(body)
        assert body == encode(idle_body(IDLE_RESULT, retry_ms))
        default_contract().validate(SchemaId.REMOTE_EXECUTION_OFFER.value, doc)  # jsonschema
        assert doc["status"] == "idle" and doc["retryAfterMs"] == retry_ms
    assert len(answers) == 3  # bounded: 3000 was built, checked and not kept
    broken = IdleAnswers({**IDLE_RESULT, "stats": None})
    with pytest.raises(ContractError):
        broken.body(2000)
    assert len(broken) == 0
