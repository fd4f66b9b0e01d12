-- ql.lease_secrets(p_credential_id, p_secret_digest, p_worker_id, p_session_id,
--                  p_generation, p_offer_id, p_token_digest, p_lease_version) -> jsonb
--
-- Purpose: the secrets of a STARTED lease (SPEC §14.3, /v1/leases/secrets): after
--   its `starting` ACK the executor asks for the secrets its run's revision
--   names (spec.secrets {ENV_NAME: secret-name}); the answer carries the
--   project's WRAPPED data key and each secret's ciphertext, never a value: the
--   ingress unwraps and decrypts them in memory with its key-encryption key
--   (service/secrets_crypto.py), which the database never sees.
-- Inputs: as ql.heartbeat_lease: p_credential_id, p_secret_digest (SHA-256 of
--   the secret), p_worker_id, p_session_id, p_offer_id (lowercase canonical
--   UUIDs), p_generation (>= 1), p_token_digest (SHA-256 of the lease token),
--   p_lease_version (>= 1, the version the worker holds: exactly the current
--   one; the call does not change it).
-- Fences, in order, on one snapshot (no row lock: the call changes no lease):
--   ql_private.lease_prelude (change `read`): the credential
--   (ql_private.authenticate, action `lease.secrets`);
--   ql_private.lease_open (offer, worker, constant-time token digest,
--   session/generation and the session live, lease live and unexpired,
--   attempt, revision: the lease_verdict categories), then the lease version
--   (any other version, a heartbeat's retry included: stale_lease_version);
--   then the lease is started (else `not_started`), its worker still holds a
--   grant of the run's pool (all_pools or a worker_pool_grants row; else
--   `pool_revoked`), and every named secret exists (else `secret_missing`).
-- Returns {"status":"ok", "runId", "projectId", "dataKey": {keyId, kekId,
--   nonce, wrappedKey} | null (no secret named), "secrets": [{env, name,
--   version, keyId, nonce, ciphertext}] (env order)} — bytes as lowercase hex;
--   | {"status":"conflict","category":…} | the denial envelope.
-- Writes: one security_audit row per delivery (action lease.secrets, outcome
--   allowed, reason secrets_delivered, detail {runId, offerId, names: the
--   secret names, each once, in C order}: names only, never a value or ciphertext); nothing
--   for a conflict; one security_audit row when denied. Never the lease: its
--   version, expiry and heartbeat stay as they were.
-- Locks: none (plain reads; the audit row is an insert).
-- Idempotency: every delivery is its own audited fact; the answer is the same
--   while nothing changes.
-- Errors: QL001 malformed ids/digest, generation or lease version NULL or < 1.
-- Planning: as ql.heartbeat_lease (generic plans, no sequential scans, no JIT).
-- Caller: ql_worker_ingress.
CREATE OR REPLACE FUNCTION ql.lease_secrets(
    p_credential_id text,
    p_secret_digest bytea,
    p_worker_id text,
    p_session_id text,
    p_generation bigint,
    p_offer_id text,
    p_token_digest bytea,
    p_lease_version bigint
)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
AS $$
DECLARE
    v_worker_id uuid := ql_private.parse_uuid(p_worker_id, 'workerId');
    v_session_id uuid := ql_private.parse_uuid(p_session_id, 'sessionId');
    v_offer_id uuid := ql_private.parse_uuid(p_offer_id, 'offerId');
    v_token_digest bytea := ql_private.require_digest(p_token_digest, 'tokenDigest');
    v_state record;
    v_lease ql_private.run_leases;
    v_project_id uuid;
    v_map jsonb;
    v_key ql_private.project_data_keys;
    v_secrets jsonb;
    v_found integer;
    v_names jsonb;
BEGIN
    IF p_generation IS NULL OR p_generation < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'generation must be an integer >= 1';
    END IF;
    IF p_lease_version IS NULL OR p_lease_version < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'leaseVersion must be an integer >= 1';
    END IF;
    -- `read` (ql_private.lease_prelude): the version must be the current one; a
    -- heartbeat's retry is no delivery either (stale_lease_version).
    v_state := ql_private.lease_prelude(
        p_credential_id, p_secret_digest, v_worker_id, v_session_id, p_generation,
        v_offer_id, v_token_digest, p_lease_version, 'lease.secrets', 'read');
    IF v_state.answer IS NOT NULL THEN
        RETURN v_state.answer;
    END IF;
    v_lease := v_state.lease;
    IF v_lease.started_at IS NULL THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', 'not_started');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM ql_private.workers w
                    WHERE w.id = v_lease.worker_id AND w.all_pools)
       AND NOT EXISTS (SELECT 1 FROM ql_private.worker_pool_grants g
                        WHERE g.worker_id = v_lease.worker_id
                          AND g.pool_id = (v_state.run).pool_id) THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', 'pool_revoked');
    END IF;

    SELECT tk.project_id, coalesce(er.spec -> 'secrets', '{}'::jsonb)
      INTO STRICT v_project_id, v_map
      FROM ql_private.execution_revisions er
      JOIN ql_private.tasks tk ON tk.id = er.task_id
     WHERE er.id = v_lease.execution_revision_id;
    SELECT k.* INTO v_key FROM ql_private.project_data_keys k WHERE k.project_id = v_project_id;
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'env', m.key, 'name', s.name, 'version', s.version, 'keyId', s.key_id,
               'nonce', encode(s.nonce, 'hex'), 'ciphertext', encode(s.ciphertext, 'hex'))
               ORDER BY m.key COLLATE "C"), '[]'::jsonb),
           count(s.name)
      INTO v_secrets, v_found
      FROM jsonb_each_text(v_map) m
      LEFT JOIN ql_private.secrets s ON s.project_id = v_project_id AND s.name = m.value;
    IF v_found <> (SELECT count(*) FROM jsonb_object_keys(v_map)) THEN
        RETURN jsonb_build_object('status', 'conflict', 'category', 'secret_missing');
    END IF;

    SELECT coalesce(jsonb_agg(x.name ORDER BY x.name COLLATE "C"), '[]'::jsonb) INTO v_names
      FROM (SELECT DISTINCT m.value AS name FROM jsonb_each_text(v_map) m) x;
    INSERT INTO ql_private.security_audit (credential_id, worker_id, action, outcome, reason,
                                           detail)
    VALUES (p_credential_id, v_worker_id, 'lease.secrets', 'allowed', 'secrets_delivered',
            jsonb_build_object('runId', v_lease.run_id, 'offerId', v_lease.offer_id,
                               'names', v_names));
    RETURN jsonb_build_object(
        'status', 'ok', 'runId', v_lease.run_id, 'projectId', v_project_id,
        'dataKey', CASE WHEN v_key.project_id IS NOT NULL THEN jsonb_build_object(
            'keyId', v_key.key_id, 'kekId', v_key.kek_id,
            'nonce', encode(v_key.nonce, 'hex'),
            'wrappedKey', encode(v_key.wrapped_key, 'hex')) END,
        'secrets', v_secrets);
END
$$;
REVOKE ALL ON FUNCTION ql.lease_secrets(text, bytea, text, text, bigint, text, bytea, bigint)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.lease_secrets(text, bytea, text, text, bigint, text, bytea, bigint)
    TO ql_worker_ingress;
