"""SQLAlchemy Core views of the tables that migrations/ creates (a test keeps them in step).

Queries written against these stay portable across SQLite and PostgreSQL. Each dialect adds
search columns of its own to `memories` (SEARCH_COLUMNS), read only by its keyword search,
and dialect-only SQL (FTS5, vec0, tsvector, pgvector, pragmas) lives behind small named
functions in the modules that need it.
"""

from sqlalchemy import BigInteger, Column, Float, Integer, LargeBinary, MetaData, Table, Text

# Columns of `memories` that only one dialect has: the FTS5 owner token on SQLite, the
# stored tsvector on PostgreSQL.
SEARCH_COLUMNS = {"sqlite": {"fts_owner"}, "postgresql": {"search_vector"}}

metadata = MetaData()

memories = Table(
    "memories",
    metadata,
    Column("seq", Integer, primary_key=True),
    Column("id", Text, nullable=False, unique=True),
    Column("api_key_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("metadata", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("expires_at", Text),
    Column("access_count", Integer, nullable=False),
    Column("last_accessed_at", Text),
    Column("needs_reindex", Integer, nullable=False),
    # What keyword search indexes: the Snowball stems of content and key (stemming.py).
    Column("search_stems", Text, nullable=False),
)

memory_history = Table(
    "memory_history",
    metadata,
    Column("seq", Integer, primary_key=True),
    Column("memory_id", Text, nullable=False),
    Column("api_key_id", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("old_type", Text),
    Column("new_type", Text),
    Column("old_key", Text),
    Column("new_key", Text),
    Column("old_content", Text),
    Column("new_content", Text),
    Column("created_at", Text, nullable=False),
    Column("reason", Text),  # why a delete happened: expired, retention, decay, summarized...
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("prefix", Text, nullable=False),
    Column("secret_hash", Text, nullable=False, unique=True),
    Column("created_at", Text, nullable=False),
    Column("last_used_at", Text),
    Column("revoked_at", Text),
    Column("scopes", Text, nullable=False),  # space-separated (keys.SCOPES)
)

settings = Table(
    "settings",
    metadata,
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
)

memory_vec_meta = Table(
    "memory_vec_meta",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("active_dim", Integer),
    Column("embedding_signature", Text),
    Column("last_reset_at", Text),
    Column("vec_loaded", Integer, nullable=False),
)

providers = Table(
    "providers",
    metadata,
    Column("id", Text, primary_key=True),
    Column("base_url", Text, nullable=False),
    Column("api_key", Text),
    Column("models", Text, nullable=False),
    Column("embedding_models", Text, nullable=False),
    Column("supports_system_role", Integer, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
)

admin_sessions = Table(
    "admin_sessions",
    metadata,
    Column("id_hash", Text, primary_key=True),
    Column("created_at", Text, nullable=False),
    Column("expires_at", Text, nullable=False),
    Column("revoked_at", Text),
)

extraction_outbox = Table(
    "extraction_outbox",
    metadata,
    Column("id", Text, primary_key=True),
    Column("api_key_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("source", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("requeued", Integer, nullable=False),
)

model_files = Table(
    "model_files",
    metadata,
    Column("name", Text, primary_key=True),
    Column("archive", LargeBinary, nullable=False),
    Column("created_at", Text, nullable=False),
)

qdrant_outbox = Table(
    "qdrant_outbox",
    metadata,
    Column("memory_id", Text, primary_key=True),
    Column("api_key_id", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("queued_at", Text, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("last_error", Text),
)

periodic_runs = Table(
    "periodic_runs",
    metadata,
    Column("job_id", Text, primary_key=True),
    Column("lease_until", Text),
    Column("runner", Text),
    Column("started_at", Text),
    Column("finished_at", Text),
    Column("status", Text),
    Column("result", Text),
    Column("error", Text),
    Column("duration_ms", Integer),
    Column("runs", Integer, nullable=False),
    Column("failures", Integer, nullable=False),
)

# Per-minute totals of the studio's Activity view (omniroute/activity.py).
activity = Table(
    "activity",
    metadata,
    Column("bucket", BigInteger, primary_key=True),  # the minute, in Unix seconds
    Column("name", Text, primary_key=True),
    Column("value", Float, nullable=False),
)
