"""The vector index's state (and pgvector, where the server offers it)."""

from omniroute.core.db.migrate import run_sql_step

revision, down_revision = "0004", "0003"


def upgrade() -> None:
    run_sql_step(revision)
