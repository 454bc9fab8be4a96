-- The Snowball stems of each memory's content and key, in its own language
-- (omniroute/memory/stemming.py), written with the row; keyword search indexes them from
-- 0014 on. The revision fills the column for the rows already there.
ALTER TABLE memories ADD COLUMN search_stems TEXT NOT NULL DEFAULT '';
