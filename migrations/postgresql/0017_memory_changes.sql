-- Every change of what keyword search reads (a memory written, deleted, or its stems or owner
-- changed), by memory seq: a process that holds a large key's keyword index in RAM
-- (omniroute/memory/search/keyword_cache.py) catches up from it, whichever process wrote.
-- Triggers write it, so no writer can forget. Ids are not in commit order here (a long
-- transaction commits its early ids late), so each change also records its transaction:
-- a reader takes every change of a transaction that was still running at its last look.
-- Changes older than a day are pruned by the retention sweep.
CREATE TABLE memory_changes (
    id BIGSERIAL PRIMARY KEY,
    memory_seq BIGINT NOT NULL,
    -- the transaction's xid8 as a number (SQLAlchemy's reflection knows no xid8)
    xid BIGINT NOT NULL DEFAULT CAST(CAST(pg_current_xact_id() AS text) AS bigint),
    changed_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX memory_changes_by_xid ON memory_changes (xid);

CREATE FUNCTION memory_changes_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO memory_changes (memory_seq) VALUES (OLD.seq);
    ELSIF TG_OP = 'INSERT'
        OR OLD.search_stems IS DISTINCT FROM NEW.search_stems
        OR OLD.api_key_id IS DISTINCT FROM NEW.api_key_id THEN
        INSERT INTO memory_changes (memory_seq) VALUES (NEW.seq);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER memory_changes_recorded
AFTER INSERT OR DELETE OR UPDATE OF search_stems, api_key_id ON memories
FOR EACH ROW EXECUTE FUNCTION memory_changes_record();
