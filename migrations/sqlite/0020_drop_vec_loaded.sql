-- memory_vec_meta.vec_loaded came from the reference, where it said whether sqlite-vec had
-- loaded. A row shared by every process cannot say that: each process loads (or fails to
-- load) the extension itself, and engine-status reports it per process (vectorStore
-- .available and .reason). It was written and never read; embedding_signature says whether
-- an index was made.
ALTER TABLE memory_vec_meta DROP COLUMN vec_loaded;
