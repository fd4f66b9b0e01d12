-- ql.publish_revision(p_project text, p_task text, p_canonical bytea,
--                     p_pool text DEFAULT NULL, p_signature text DEFAULT NULL) -> jsonb
--   {taskId, revisionId, revision, contentDigest, created, pool, signatureKid}
--
-- Purpose: publish the execution content of a task (SPEC §2, §8 `admin task
--   publish`; DESIGN "Execution revision content"). `p_canonical` is the RFC 8785
--   bytes of {executor, kind, placement?, spec} produced by the publish
--   compiler; the database hashes the bytes itself (content_digest = 'sha256:'
--   || hex sha256), checks their shape and stores bytes + digest, so a digest
--   can never disagree with the stored content. The project and task are created
--   on first publish. Identical content (same digest as the task's CURRENT
--   revision) returns that revision with created=false; anything else becomes
--   revision max+1 and the task's current revision.
-- Pool (SPEC §13.1): the task publishes into one pool of its project, and its
--   runs carry it (ql.enqueue_runs). p_pool 'P/N' names it (P must be
--   p_project: another project's pool is refused, as is a missing one) and
--   moves an existing task there (runs already queued keep their pool); NULL
--   keeps an existing task's pool and puts a new task in 'P/default'. The
--   answer's `pool` is the task's pool after the call.
-- Signature (SPEC §16.1): p_signature is the detached compact JWS
--   `header..signature` (EdDSA) the publisher made over the RFC 8785 bytes of
--   {taskId, kind, executor, spec, placement?}; it is stored with the revision
--   (signature_jws, and signature_kid from its protected header) and never
--   verified here: the database holds no trusted key, the worker verifies. A
--   signed publish needs the task id before signing: the admin CLI calls
--   ql.prepare_task first, in the same transaction. Dedupe: content identical
--   to the current revision is that revision (created=false) when p_signature
--   is NULL (an unsigned re-publish never strips a signature) or equal to the
--   stored one; a signature the current revision does not carry (signing
--   unsigned content, re-signing with a new key) makes a new revision, since a
--   stored revision never changes. `signatureKid` answers the stored revision's
--   kid (null: unsigned).
-- Inputs: p_project, p_task (names ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$),
--   p_canonical (<= 96 KiB), p_pool ('P/N' or NULL), p_signature (JWS or NULL).
-- Fences (the shape; the compiler's JSON Schema validation is not trusted):
--   keys exactly kind, executor, spec and optional placement; kind =
--   'qinglong/command@v1'; executor = 'remote_worker'; spec an object with keys
--   from {schema, argv, env, secrets, cwd, timeoutS}, schema = 'qinglong/command@v1',
--   argv a non-empty array of strings, env (if present) an object of strings,
--   secrets (if present, SPEC §14.2) {ENV_NAME: secret-name} naming secrets the
--   project has, no ENV_NAME also in env (ql_private.validate_secret_refs: the
--   revision pins names, never values; QL001 COLUMN secrets naming the one at
--   fault),
--   cwd (if present) a string, timeoutS a positive integer, and no placement
--   inside spec; placement via ql_private.validate_placement.
-- Writes: on new content one execution_revisions row and the task's
--   current_revision_id (the project, its default pool and the task rows on
--   first publish); the task's pool_id when p_pool moves it; nothing on
--   identical content in the same pool.
-- Locks: none on the identical-content fast path (a plain read: re-publishing
--   the same content writes nothing at all, not even a row lock). Otherwise the
--   task row FOR NO KEY UPDATE, which serializes concurrent publishes of one task
--   (revision numbers and current_revision_id never race) without blocking the
--   foreign-key checks of concurrent enqueues.
-- Idempotency: identical content -> same revision, created=false, no writes.
-- Errors: QL001 bad project/task name, bytes not a UTF-8 JSON object, wrong
--   shape, pool not P/N, of another project or missing (COLUMN pool), a
--   signature that is not a detached compact JWS with the protected header
--   exactly {alg: EdDSA, kid} (COLUMN signature); QL002 bytes over 96 KiB or oversize placement sets; QL003 invalid
--   SemVer in placement.
-- Caller: ql_runtime (control plane).
CREATE OR REPLACE FUNCTION ql.publish_revision(
    p_project text, p_task text, p_canonical bytea, p_pool text DEFAULT NULL,
    p_signature text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_max_content_bytes constant integer := 98304;
    v_name_pattern constant text := '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    v_doc jsonb;
    v_spec jsonb;
    v_digest text;
    v_project_id uuid;
    v_task ql_private.tasks;
    v_current ql_private.execution_revisions;
    v_current_row record;
    v_next_revision integer;
    v_revision ql_private.execution_revisions;
    v_pool ql_private.pools;
    v_kid text;
BEGIN
    IF p_project IS NULL OR p_project !~ v_name_pattern THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('project must match %s', v_name_pattern);
    END IF;
    IF p_task IS NULL OR p_task !~ v_name_pattern THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = format('task must match %s', v_name_pattern);
    END IF;

    IF p_pool IS NOT NULL AND (p_pool !~ '^[^/]+/[a-z0-9][a-z0-9._-]{0,62}$'
                               OR split_part(p_pool, '/', 1) <> p_project) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'pool',
            MESSAGE = 'pool must be a pool of the task''s project: PROJECT/NAME';
    END IF;

    v_kid := ql_private.signature_kid(p_signature);

    v_doc := ql_private.json_object_from_bytes(p_canonical, v_max_content_bytes, 'content');
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(v_doc) k
                WHERE k NOT IN ('kind', 'executor', 'spec', 'placement'))
       OR NOT v_doc ?& ARRAY['kind', 'executor', 'spec'] THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'content keys must be kind, executor, spec and optional placement';
    END IF;
    IF v_doc -> 'kind' IS DISTINCT FROM '"qinglong/command@v1"'::jsonb THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'kind must be qinglong/command@v1';
    END IF;
    IF v_doc -> 'executor' IS DISTINCT FROM '"remote_worker"'::jsonb THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'executor must be remote_worker';
    END IF;

    v_spec := v_doc -> 'spec';
    IF jsonb_typeof(v_spec) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec must be an object';
    END IF;
    IF v_spec ? 'placement' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'spec must not contain placement (it is a top-level key)';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(v_spec) k
                WHERE k NOT IN ('schema', 'argv', 'env', 'secrets', 'cwd', 'timeoutS')) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec has an unknown key';
    END IF;
    IF v_spec -> 'schema' IS DISTINCT FROM '"qinglong/command@v1"'::jsonb THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec.schema must be qinglong/command@v1';
    END IF;
    IF jsonb_typeof(v_spec -> 'argv') IS DISTINCT FROM 'array'
       OR jsonb_array_length(v_spec -> 'argv') = 0
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(v_spec -> 'argv') a
                   WHERE jsonb_typeof(a) <> 'string') THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'spec.argv must be a non-empty array of strings';
    END IF;
    IF v_spec ? 'env' AND (jsonb_typeof(v_spec -> 'env') <> 'object'
       OR EXISTS (SELECT 1 FROM jsonb_each(v_spec -> 'env') e
                   WHERE jsonb_typeof(e.value) <> 'string')) THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec.env must be an object of strings';
    END IF;
    IF v_spec ? 'secrets' THEN
        PERFORM ql_private.validate_secret_refs(p_project, v_spec);
    END IF;
    IF v_spec ? 'cwd' AND jsonb_typeof(v_spec -> 'cwd') <> 'string' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec.cwd must be a string';
    END IF;
    -- A JSON integer: a number whose text has no fraction/exponent, 1 .. 2^31-1.
    IF jsonb_typeof(v_spec -> 'timeoutS') IS DISTINCT FROM 'number'
       OR (v_spec ->> 'timeoutS') !~ '^[1-9][0-9]{0,9}$'
       OR (v_spec ->> 'timeoutS')::bigint > 2147483647 THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'spec.timeoutS must be a positive integer';
    END IF;
    IF v_doc ? 'placement' THEN
        PERFORM ql_private.validate_placement(v_doc -> 'placement');
    END IF;

    v_digest := 'sha256:' || encode(sha256(p_canonical), 'hex');

    -- Fast path: identical to the current revision, in the same pool -> no write
    -- of any kind.
    SELECT er.*, pl.name AS pool_name INTO v_current_row
      FROM ql_private.projects p
      JOIN ql_private.tasks tk ON tk.project_id = p.id AND tk.name = p_task
      JOIN ql_private.pools pl ON pl.id = tk.pool_id
      JOIN ql_private.execution_revisions er ON er.id = tk.current_revision_id
     WHERE p.name = p_project;
    IF FOUND AND v_current_row.content_digest = v_digest
       AND (p_signature IS NULL OR p_signature = v_current_row.signature_jws)
       AND (p_pool IS NULL OR p_pool = p_project || '/' || v_current_row.pool_name) THEN
        RETURN jsonb_build_object('taskId', v_current_row.task_id,
            'revisionId', v_current_row.id, 'revision', v_current_row.revision,
            'contentDigest', v_current_row.content_digest, 'created', false,
            'pool', p_project || '/' || v_current_row.pool_name,
            'signatureKid', v_current_row.signature_kid);
    END IF;

    -- Create project/task on first publish. DO NOTHING + re-read: a concurrent
    -- creator wins the insert and this session reads its committed row.
    SELECT p.id INTO v_project_id FROM ql_private.projects p WHERE p.name = p_project;
    IF NOT FOUND THEN
        INSERT INTO ql_private.projects (name) VALUES (p_project)
        ON CONFLICT (name) DO NOTHING;
        SELECT p.id INTO v_project_id FROM ql_private.projects p
         WHERE p.name = p_project;
    END IF;
    IF p_pool IS NOT NULL THEN
        SELECT pl.* INTO v_pool FROM ql_private.pools pl
         WHERE pl.project_id = v_project_id AND pl.name = split_part(p_pool, '/', 2);
        IF NOT FOUND THEN
            -- Invalid input, like another project's pool: nothing to publish into.
            RAISE EXCEPTION USING ERRCODE = 'QL001', COLUMN = 'pool',
                MESSAGE = 'pool does not exist in the task''s project (admin pool create)';
        END IF;
    END IF;
    SELECT tk.* INTO v_task FROM ql_private.tasks tk
     WHERE tk.project_id = v_project_id AND tk.name = p_task
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        -- pool_id NULL: the project's default pool (tasks_default_pool trigger).
        INSERT INTO ql_private.tasks (project_id, name, pool_id)
        VALUES (v_project_id, p_task, v_pool.id)
        ON CONFLICT (project_id, name) DO NOTHING;
        SELECT tk.* INTO v_task FROM ql_private.tasks tk
         WHERE tk.project_id = v_project_id AND tk.name = p_task
           FOR NO KEY UPDATE;
    END IF;
    IF v_pool.id IS NOT NULL AND v_task.pool_id <> v_pool.id THEN
        UPDATE ql_private.tasks tk SET pool_id = v_pool.id WHERE tk.id = v_task.id;
        v_task.pool_id := v_pool.id;
    END IF;
    SELECT pl.* INTO STRICT v_pool FROM ql_private.pools pl WHERE pl.id = v_task.pool_id;

    -- Re-check under the task lock: a concurrent publish may have just made
    -- this very content current.
    SELECT er.* INTO v_current
      FROM ql_private.execution_revisions er WHERE er.id = v_task.current_revision_id;
    IF FOUND AND v_current.content_digest = v_digest
       AND (p_signature IS NULL OR p_signature = v_current.signature_jws) THEN
        RETURN jsonb_build_object('taskId', v_current.task_id, 'revisionId', v_current.id,
            'revision', v_current.revision, 'contentDigest', v_current.content_digest,
            'created', false, 'pool', p_project || '/' || v_pool.name,
            'signatureKid', v_current.signature_kid);
    END IF;

    SELECT coalesce(max(er.revision), 0) + 1 INTO v_next_revision
      FROM ql_private.execution_revisions er WHERE er.task_id = v_task.id;
    INSERT INTO ql_private.execution_revisions AS er (
        task_id, revision, kind, executor, spec, placement, canonical, content_digest,
        signature_kid, signature_jws)
    VALUES (
        v_task.id, v_next_revision, v_doc ->> 'kind', v_doc ->> 'executor', v_spec,
        v_doc -> 'placement', p_canonical, v_digest, v_kid, p_signature)
    RETURNING er.* INTO v_revision;
    UPDATE ql_private.tasks tk SET current_revision_id = v_revision.id WHERE tk.id = v_task.id;
    RETURN jsonb_build_object('taskId', v_revision.task_id, 'revisionId', v_revision.id,
        'revision', v_revision.revision, 'contentDigest', v_revision.content_digest,
        'created', true, 'pool', p_project || '/' || v_pool.name,
        'signatureKid', v_revision.signature_kid);
END
$$;
REVOKE ALL ON FUNCTION ql.publish_revision(text, text, bytea, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.publish_revision(text, text, bytea, text, text) TO ql_runtime;
