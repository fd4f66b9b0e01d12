-- ql.rotate_credential(p_credential_id, p_secret_digest, p_worker_id,
--                      p_new_credential_id, p_new_secret_digest) -> jsonb
--
-- Purpose: a worker replaces its own credential (SPEC §16.2, POST
--   /v1/credentials/rotate, mTLS + the current credential). The ingress
--   generates the new id and secret and sends only the secret's SHA-256; the
--   database never sees a secret.
-- Inputs: p_credential_id, p_secret_digest, p_worker_id: the presented
--   credential and the certificate's worker, checked by ql_private.authenticate
--   (action credential.rotate); p_new_credential_id (^[a-z0-9]{16}$, new),
--   p_new_secret_digest (32 bytes).
-- Returns: {"status":"ok", credential: {workerId, credentialId, issuedAtMs,
--   expiresAtMs (null: never), previousCredentialId, previousExpiresAtMs}} or
--   the denial envelope of ql_private.authenticate.
-- Fences: the presented credential (authenticate: exists, secret, not revoked,
--   not expired, this worker, worker not disabled).
-- Writes: the new worker_credentials row (the presented one's ttl_s, expires_at
--   = now + ttl_s, rotated_from = the presented one); the presented one's
--   expires_at becomes at most now + 24 h (it stays valid until the new one is
--   first used: ql_private.credential_first_use); an earlier successor of the
--   presented credential that was never used is revoked (a worker that lost the
--   answer, or crashed before writing it, rotates again). One
--   `worker.credential_rotated` event (credential ids only). NOTIFY ql_dispatch
--   'c:<presented>' (its expiry moved). A denial writes its one audit row only.
-- Locks: the presented credential's row FOR UPDATE (concurrent rotations of
--   one credential serialize), then its unused successors (UPDATE).
-- Idempotency: none: every call issues a new credential and revokes the
--   previous unused one, so a retry after a lost answer converges.
-- Errors: QL001 malformed worker id / new id / new digest, or the new id
--   exists.
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.rotate_credential(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_new_credential_id text,
    p_new_secret_digest bytea
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_new_digest bytea := ql_private.require_digest(p_new_secret_digest, 'newSecretDigest');
    v_denied jsonb;
    v_old ql_private.worker_credentials;
    v_new ql_private.worker_credentials;
    v_now timestamptz;
BEGIN
    IF p_new_credential_id IS NULL OR p_new_credential_id !~ '^[a-z0-9]{16}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'newCredentialId',
            MESSAGE = 'newCredentialId must match ^[a-z0-9]{16}$';
    END IF;
    v_denied := ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                        'credential.rotate');
    IF v_denied IS NOT NULL THEN
        RETURN v_denied;
    END IF;
    SELECT * INTO v_old FROM ql_private.worker_credentials c
     WHERE c.credential_id = p_credential_id FOR UPDATE;
    v_now := clock_timestamp();
    IF v_old.revoked_at IS NOT NULL OR (v_old.expires_at IS NOT NULL AND v_old.expires_at <= v_now) THEN
        -- Revoked or retired while this call waited for the row lock: refuse it as
        -- authenticate would now (one audit row).
        RETURN ql_private.authenticate(p_credential_id, p_secret_digest, v_worker_id,
                                       'credential.rotate');
    END IF;
    UPDATE ql_private.worker_credentials c SET revoked_at = v_now
     WHERE c.rotated_from = p_credential_id AND c.first_used_at IS NULL
       AND c.revoked_at IS NULL;
    INSERT INTO ql_private.worker_credentials AS c
           (credential_id, worker_id, secret_digest, created_at, ttl_s, expires_at,
            rotated_from)
    VALUES (p_new_credential_id, v_worker_id, v_new_digest, v_now, v_old.ttl_s,
            v_now + make_interval(secs => v_old.ttl_s), p_credential_id)
    ON CONFLICT ON CONSTRAINT worker_credentials_pkey DO NOTHING
    RETURNING * INTO v_new;
    IF v_new.credential_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'newCredentialId',
            MESSAGE = 'newCredentialId already exists';
    END IF;
    UPDATE ql_private.worker_credentials c
       SET expires_at = least(coalesce(c.expires_at, 'infinity'), v_now + interval '24 hours')
     WHERE c.credential_id = p_credential_id
    RETURNING * INTO v_old;
    INSERT INTO ql_private.events (type, worker_id, payload)
    VALUES ('worker.credential_rotated', v_worker_id,
            jsonb_build_object('credentialId', v_new.credential_id,
                               'previousCredentialId', p_credential_id));
    PERFORM pg_notify('ql_dispatch', 'c:' || p_credential_id);
    RETURN jsonb_build_object('status', 'ok', 'credential', jsonb_build_object(
        'workerId', v_worker_id,
        'credentialId', v_new.credential_id,
        'issuedAtMs', ql_private.epoch_ms(v_new.created_at),
        'expiresAtMs', ql_private.epoch_ms(v_new.expires_at),
        'previousCredentialId', p_credential_id,
        'previousExpiresAtMs', ql_private.epoch_ms(v_old.expires_at)));
END
$$;
REVOKE ALL ON FUNCTION ql.rotate_credential(text, bytea, text, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.rotate_credential(text, bytea, text, text, bytea) TO ql_worker_ingress;
