"""Unit tests of the ingress's small parts (no network, no database)."""

from __future__ import annotations

import json

import pytest

from qinglong.service.audit import AuditLog, AuditRecord, Outcome
from qinglong.service.config import ConfigError, load_config
from qinglong.service.credentials import CredentialProblem, parse_authorization
from qinglong.service.errors import error_body
from qinglong.service.gateway import connection_kwargs
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
    config = load_config(path, environ={"QL_INGRESS_PORT": "0", "QL_INGRESS_PREPARE_THRESHOLD":
                                        "null", "QL_INGRESS_RATE_PER_S": "2.5"})
    assert config.port == 0 and config.prepare_threshold is None and config.rate_per_s == 2.5
    assert config.cert_file == str(tmp_path / "s.pem")
    assert connection_kwargs(config)["prepare_threshold"] is None
    assert connection_kwargs(config)["autocommit"] is True
    assert "statement_timeout=3000" in connection_kwargs(config)["options"]


@pytest.mark.parametrize("doc,env", [
    ({**REQUIRED, "prot": 1}, {}),
    ({**REQUIRED, "port": "x"}, {}),
    ({**REQUIRED, "maxBodyBytes": 8192}, {}),
    ({"dsn": "host=x"}, {}),
    (REQUIRED, {"QL_INGRESS_NOPE": "1"}),
    (REQUIRED, {"QL_INGRESS_STATEMENT_TIMEOUT_MODE": "sometimes"}),
])
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
    for bad in (cred.token, f"Basic {cred.token}", f"Bearer {cred.token}x",
                f"Bearer {cred.token[:-1]}B", "Bearer ql3w_short_x", f"Bearer  {cred.token}"):
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
    AuditLog(lines.append).record(AuditRecord("offer.pull", Outcome.DENIED, "bad_secret",
                                              "abcdefghijklmnop", None))
    doc = json.loads(lines[0])
    assert set(doc) == {"timeMs", "stream", "credentialId", "workerId", "action", "outcome",
                        "reason"}
    assert doc["outcome"] == "denied"


def test_error_body_shape():
    assert json.loads(error_body(409, "token_mismatch")) == {
        "schema": "qinglong/error@v1", "error": "conflict", "reason": "token_mismatch"}


def test_config_accepts_the_nested_dev_layout(tmp_path):
    nested = {
        "listen": {"host": "127.0.0.1", "port": 18443},
        "admin": {"host": "127.0.0.1", "port": 19464},
        "dsn": "host=x",
        "tls": {"certFile": "s.pem", "keyFile": "s.key", "workerCaFile": "ca.pem"},
        "database": {"poolMin": 1, "poolMax": 8, "statementTimeoutMs": 2000,
                     "preparedStatements": False},
        "limits": {"ratePerSecond": 50, "burst": 100, "maxConnections": 1024,
                   "headerTimeoutS": 10, "bodyTimeoutS": 10},
        "auditLog": "stderr",
    }
    config = load_config(_write(tmp_path, nested), environ={})
    assert (config.port, config.admin_port, config.pool_max_size) == (18443, 19464, 8)
    assert config.client_ca_file == str(tmp_path / "ca.pem")
    assert config.prepare_threshold is None and config.rate_burst == 100
    assert config.max_connections == 1024 and config.statement_timeout_ms == 2000
