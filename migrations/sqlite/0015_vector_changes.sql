-- Every vector write and delete, by memory seq, in order: a process that holds a large key's
-- vectors in RAM (omniroute/memory/vector_cache.py) catches up from it before each search,
-- whichever process wrote. AUTOINCREMENT: an id is never reused, so a reader can tell when
-- the pruned head has passed it.
CREATE TABLE vector_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_seq INTEGER NOT NULL
);
