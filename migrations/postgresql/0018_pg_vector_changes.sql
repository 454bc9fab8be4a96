-- Every vector write and delete, by memory seq: a process that holds a large key's vectors in
-- RAM (omniroute/memory/search/vector_cache.py) catches up from it before each search,
-- whichever process wrote. As memory_changes (0017): each change records its transaction,
-- and the retention sweep prunes changes older than a day.
CREATE TABLE vector_changes (
    id BIGSERIAL PRIMARY KEY,
    memory_seq BIGINT NOT NULL,
    xid BIGINT NOT NULL DEFAULT CAST(CAST(pg_current_xact_id() AS text) AS bigint),
    changed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX vector_changes_by_xid ON vector_changes (xid);

-- One row a changed vector, written once a statement from its transition table: a bulk
-- write of a thousand vectors costs one INSERT ... SELECT, not a thousand.
CREATE FUNCTION vector_changes_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO vector_changes (memory_seq) SELECT seq FROM old_rows;
    ELSE
        INSERT INTO vector_changes (memory_seq) SELECT seq FROM new_rows;
    END IF;
    RETURN NULL;
END;
$$;

-- memory_vectors is made (and made again for a new model) by the index (pgvector.py), which
-- calls this after each CREATE TABLE; a database that holds it already is watched here.
CREATE FUNCTION vector_changes_watch() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    CREATE TRIGGER vector_changes_inserted AFTER INSERT ON memory_vectors
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
        EXECUTE FUNCTION vector_changes_record();
    CREATE TRIGGER vector_changes_updated AFTER UPDATE ON memory_vectors
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT
        EXECUTE FUNCTION vector_changes_record();
    CREATE TRIGGER vector_changes_deleted AFTER DELETE ON memory_vectors
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT
        EXECUTE FUNCTION vector_changes_record();
END;
$$;

DO $$
BEGIN
    IF to_regclass('memory_vectors') IS NOT NULL THEN
        PERFORM vector_changes_watch();
    END IF;
END;
$$;

-- Large keys are searched in each process's RAM now; pgvector's HNSW index only slowed every
-- write (18 times at 20k vectors: docs/benchmarks.md) and is dropped where an older
-- version made it.
DROP INDEX IF EXISTS memory_vectors_ann;
