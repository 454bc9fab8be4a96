-- SQLite's vector change log (sqlite/0015) serves its RAM cache of large keys' vectors;
-- pgvector's HNSW index needs none, so PostgreSQL has nothing to change here.
SELECT 1;
