-- ql.publish_revision(project text, task text, canonical bytea) -> jsonb
--   {taskId, revisionId, revision, contentDigest, created}
--
-- Purpose: publish the execution content of a task (SPEC §2, §8 `admin task
--   publish`; DESIGN "Execution revision content"). `canonical` is the RFC 8785
--   bytes of {executor, kind, placement?, spec} produced by the publish
--   compiler; the database hashes the bytes itself (content_digest = 'sha256:'
--   || hex sha256), checks their shape and stores bytes + digest, so a digest
--   can never disagree with the stored content. The project and task are created
--   on first publish. Identical content (same digest as the task's CURRENT
--   revision) returns that revision with created=false; anything else becomes
--   revision max+1 and the task's current revision.
-- Shape checked here (the compiler's JSON Schema validation is not trusted):
--   keys exactly kind, executor, spec and optional placement; kind =
--   'qinglong/command@v1'; executor = 'remote_worker'; spec an object with keys
--   from {schema, argv, env, cwd, timeoutS}, schema = 'qinglong/command@v1',
--   argv a non-empty array of strings, env (if present) an object of strings,
--   cwd (if present) a string, timeoutS a positive integer, and no placement
--   inside spec; placement via ql_private.validate_placement.
-- Caller: ql_runtime (control plane).
-- Locks: none on the identical-content fast path (a plain read: re-publishing
--   the same content writes nothing at all, not even a row lock). Otherwise the
--   task row FOR NO KEY UPDATE, which serializes concurrent publishes of one task
--   (revision numbers and current_revision_id never race) without blocking the
--   foreign-key checks of concurrent enqueues.
-- Idempotency: identical content -> same revision, created=false, no writes.
-- SQLSTATEs: QL001 bad project/task name, bytes not a UTF-8 JSON object, wrong
--   shape; QL002 bytes over 96 KiB or oversize placement sets; QL003 invalid
--   SemVer in placement.
CREATE OR REPLACE FUNCTION ql.publish_revision(project text, task text, canonical bytea)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    max_content_bytes constant integer := 98304;
    name_pattern constant text := '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
    doc jsonb;
    v_spec jsonb;
    digest text;
    v_project_id uuid;
    t ql_private.tasks;
    cur ql_private.execution_revisions;
    next_revision integer;
    rev ql_private.execution_revisions;
BEGIN
    IF publish_revision.project IS NULL OR publish_revision.project !~ name_pattern THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format('project must match %s', name_pattern);
    END IF;
    IF publish_revision.task IS NULL OR publish_revision.task !~ name_pattern THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = format('task must match %s', name_pattern);
    END IF;

    doc := ql_private.json_object_from_bytes(publish_revision.canonical, max_content_bytes, 'content');
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(doc) k
                WHERE k NOT IN ('kind', 'executor', 'spec', 'placement'))
       OR NOT doc ?& ARRAY['kind', 'executor', 'spec'] THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'content keys must be kind, executor, spec and optional placement';
    END IF;
    IF doc -> 'kind' IS DISTINCT FROM '"qinglong/command@v1"'::jsonb THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'kind must be qinglong/command@v1';
    END IF;
    IF doc -> 'executor' IS DISTINCT FROM '"remote_worker"'::jsonb THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'executor must be remote_worker';
    END IF;

    v_spec := doc -> 'spec';
    IF jsonb_typeof(v_spec) <> 'object' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001', MESSAGE = 'spec must be an object';
    END IF;
    IF v_spec ? 'placement' THEN
        RAISE EXCEPTION USING ERRCODE = 'QL001',
            MESSAGE = 'spec must not contain placement (it is a top-level key)';
    END IF;
    IF EXISTS (SELECT 1 FROM jsonb_object_keys(v_spec) k
                WHERE k NOT IN ('schema', 'argv', 'env', 'cwd', 'timeoutS')) THEN
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
    IF doc ? 'placement' THEN
        PERFORM ql_private.validate_placement(doc -> 'placement');
    END IF;

    digest := 'sha256:' || encode(sha256(publish_revision.canonical), 'hex');

    -- Fast path: identical to the current revision -> no write of any kind.
    SELECT er.* INTO cur
      FROM ql_private.projects p
      JOIN ql_private.tasks tk ON tk.project_id = p.id AND tk.name = publish_revision.task
      JOIN ql_private.execution_revisions er ON er.id = tk.current_revision_id
     WHERE p.name = publish_revision.project;
    IF FOUND AND cur.content_digest = digest THEN
        RETURN jsonb_build_object('taskId', cur.task_id, 'revisionId', cur.id,
            'revision', cur.revision, 'contentDigest', cur.content_digest, 'created', false);
    END IF;

    -- Create project/task on first publish. DO NOTHING + re-read: a concurrent
    -- creator wins the insert and this session reads its committed row.
    SELECT p.id INTO v_project_id FROM ql_private.projects p WHERE p.name = publish_revision.project;
    IF NOT FOUND THEN
        INSERT INTO ql_private.projects (name) VALUES (publish_revision.project)
        ON CONFLICT (name) DO NOTHING;
        SELECT p.id INTO v_project_id FROM ql_private.projects p
         WHERE p.name = publish_revision.project;
    END IF;
    SELECT tk.* INTO t FROM ql_private.tasks tk
     WHERE tk.project_id = v_project_id AND tk.name = publish_revision.task
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        INSERT INTO ql_private.tasks (project_id, name)
        VALUES (v_project_id, publish_revision.task)
        ON CONFLICT (project_id, name) DO NOTHING;
        SELECT tk.* INTO t FROM ql_private.tasks tk
         WHERE tk.project_id = v_project_id AND tk.name = publish_revision.task
           FOR NO KEY UPDATE;
    END IF;

    -- Re-check under the task lock: a concurrent publish may have just made
    -- this very content current.
    SELECT er.* INTO cur FROM ql_private.execution_revisions er WHERE er.id = t.current_revision_id;
    IF FOUND AND cur.content_digest = digest THEN
        RETURN jsonb_build_object('taskId', cur.task_id, 'revisionId', cur.id,
            'revision', cur.revision, 'contentDigest', cur.content_digest, 'created', false);
    END IF;

    SELECT coalesce(max(er.revision), 0) + 1 INTO next_revision
      FROM ql_private.execution_revisions er WHERE er.task_id = t.id;
    INSERT INTO ql_private.execution_revisions AS er (
        task_id, revision, kind, executor, spec, placement, canonical, content_digest)
    VALUES (
        t.id, next_revision, doc ->> 'kind', doc ->> 'executor', v_spec, doc -> 'placement',
        publish_revision.canonical, digest)
    RETURNING er.* INTO rev;
    UPDATE ql_private.tasks tk SET current_revision_id = rev.id WHERE tk.id = t.id;
    RETURN jsonb_build_object('taskId', rev.task_id, 'revisionId', rev.id,
        'revision', rev.revision, 'contentDigest', rev.content_digest, 'created', true);
END
$$;
REVOKE ALL ON FUNCTION ql.publish_revision(text, text, bytea) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql.publish_revision(text, text, bytea) TO ql_runtime;
COMMENT ON FUNCTION ql.publish_revision(text, text, bytea) IS
'Publish canonical {executor, kind, placement?, spec} bytes (<=96 KiB) as the task''s next execution revision; digest computed in the database; project/task created on first publish. Identical to the current revision -> that revision, created=false, no writes. Returns {taskId, revisionId, revision, contentDigest, created}. Caller: ql_runtime. Locks: task row FOR NO KEY UPDATE (not on the identical fast path). QL001 shape, QL002 size, QL003 SemVer.';
