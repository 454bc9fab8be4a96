-- SQLite has logged its vector writes since 0015 (vector_changes, written by the index).
SELECT 1;
