-- Per-minute totals for the studio's Activity view: `bucket` is the minute's Unix time,
-- `name` the series (chats, memories injected, facts extracted, retrieval latency buckets,
-- tokens added or saved), `value` the sum every process added to it (upserts that add).
CREATE TABLE activity (
    bucket INTEGER NOT NULL,
    name TEXT NOT NULL,
    value REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (bucket, name)
);
