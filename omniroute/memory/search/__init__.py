"""Finding memories: keyword search (FTS5 on SQLite, tsvector on PostgreSQL, with the same
stems), vector search (sqlite-vec, pgvector, the in-RAM cache), their fusion into what a chat
injects (`retrieval`), the optional rerank, the token budget and the preview of it all."""
