-- Keyword search on Snowball stems, as on SQLite: the tsvector is the `simple` split of
-- `search_stems` (0013, filled), made in each memory's own language, detected when its
-- metadata names none (where the `simple` configuration used to leave it unstemmed).
DROP INDEX memories_search;
ALTER TABLE memories DROP COLUMN search_vector;
ALTER TABLE memories ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', search_stems)) STORED;
CREATE INDEX memories_search ON memories USING gin (search_vector);
DROP FUNCTION omr_search_config(text);
DROP FUNCTION omr_fold(text);
