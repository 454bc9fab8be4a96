"""The Qdrant tier: vectors mirrored into a Qdrant collection, searched inside one tenant.

The SQL store is the truth: writes mark memories in the `qdrant_outbox` table in their own
transaction, a job (sync.py) makes Qdrant match, verify repairs drift, and retrieval uses
Qdrant only while it is healthy and caught up (tier.py), falling back to the local index.

config.py     settings with QDRANT_* fallbacks, the API key sealed
connection.py the client (a Qdrant server through the URL guard, or local mode on disk)
index.py      collections named by embedding signature, points, tenant-filtered search
outbox.py     which memories Qdrant has yet to take (or drop)
sync.py       the dual-write job, backfill, verify and cleanup
tier.py       the retrieval tier with its circuit breaker, and the status report
"""
