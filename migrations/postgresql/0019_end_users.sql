-- End users inside a key, as on SQLite (sqlite/0019): `owner` is the search partition, the
-- key alone for its shared memories and the key and user joined by U+001F for a user's.
-- PostgreSQL stores the generated column (the table is written once, here).
ALTER TABLE memories ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN owner TEXT GENERATED ALWAYS AS (
    CASE WHEN user_id = '' THEN api_key_id ELSE api_key_id || chr(31) || user_id END
) STORED;

DROP INDEX memories_owner_key;
CREATE UNIQUE INDEX memories_owner_key ON memories (api_key_id, user_id, key);
CREATE INDEX memories_partition ON memories (owner, created_at);

CREATE OR REPLACE FUNCTION memory_changes_record() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO memory_changes (memory_seq) VALUES (OLD.seq);
    ELSIF TG_OP = 'INSERT'
        OR OLD.search_stems IS DISTINCT FROM NEW.search_stems
        OR OLD.owner IS DISTINCT FROM NEW.owner THEN
        INSERT INTO memory_changes (memory_seq) VALUES (NEW.seq);
    END IF;
    RETURN NULL;
END;
$$;

DROP TRIGGER memory_changes_recorded ON memories;
CREATE TRIGGER memory_changes_recorded
AFTER INSERT OR DELETE OR UPDATE OF search_stems, api_key_id, user_id ON memories
FOR EACH ROW EXECUTE FUNCTION memory_changes_record();

ALTER TABLE extraction_outbox ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
