"""A memory's life after it is written: retention and expiry (`sweep`), typed decay,
summaries and compaction, bulk deletion, erasure of a key, and the embedding backfill."""
